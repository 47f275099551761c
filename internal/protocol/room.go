package protocol

import (
	"unicode"
	"unicode/utf8"
)

// MaxRoomLen is the longest room name, in bytes.
const MaxRoomLen = 64

// RoomRule says what a room name is, for refusals.
const RoomRule = "room names are 1 to 64 characters of A-Z a-z 0-9 . _ - and : (ns:name, a room of namespace ns), not starting or ending with :"

// ValidRoom reports whether name is a room name: 1 to MaxRoomLen bytes of
// [A-Za-z0-9._-:], not starting or ending with a colon. What comes before
// the first colon names the room's namespace (internal/namespace).
func ValidRoom(name []byte) bool {
	if len(name) == 0 || len(name) > MaxRoomLen || name[0] == ':' || name[len(name)-1] == ':' {
		return false
	}
	for _, c := range name {
		if !roomByte(c) {
			return false
		}
	}
	return true
}

// ValidRoomString is ValidRoom for a string.
func ValidRoomString(name string) bool {
	if len(name) == 0 || len(name) > MaxRoomLen || name[0] == ':' || name[len(name)-1] == ':' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !roomByte(name[i]) {
			return false
		}
	}
	return true
}

func roomByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '.', c == '_', c == '-', c == ':':
		return true
	}
	return false
}

// MaxEpochLen is the longest stream epoch a client may send back.
const MaxEpochLen = 32

// EpochRule says what an epoch is, for refusals.
const EpochRule = "epoch must be the room's epoch as the server sent it: up to 32 letters and digits"

// ValidEpoch reports whether e can be an epoch the server sent: up to
// MaxEpochLen letters and digits. The empty string (no epoch) is valid.
func ValidEpoch(e string) bool {
	if len(e) > MaxEpochLen {
		return false
	}
	for i := 0; i < len(e); i++ {
		if c := e[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// MaxUserLen is the longest user name, in bytes.
const MaxUserLen = 64

// UserRule says what a user's name is, for refusals. It is one rule for
// every entry that names a user: a token's sub, the connect hook's answer,
// ?name=, the server API's paths (docs/api.md#who-a-user-is).
const UserRule = "a user name is at most 64 bytes of UTF-8 text without control, format (bidi, zero-width) or line-separator characters, and without white space at either end"

// ValidUser reports whether name may name a user (in presence, as a
// message's forced sender, in the server API): at most MaxUserLen bytes of
// valid UTF-8 with no character that hides or reorders what a reader sees.
// Refused: control characters (Cc: C0, DEL, C1), format characters (Cf:
// the bidi embeddings, overrides and isolates U+202A–U+202E and
// U+2066–U+2069, the marks U+200E, U+200F and U+061C, the zero-width space,
// non-joiner and joiner U+200B–U+200D, the word joiner U+2060, the byte
// order mark U+FEFF, the soft hyphen U+00AD, tag characters), the line and
// paragraph separators (Zl, Zp), and white space at either end ("ann" and
// "ann " would look alike). The empty string names nobody and is valid.
// validUserBytes is ValidUser of b, without allocating for ASCII (the
// sender of nearly every message: a chat message's sender follows the
// rule, so that a client's own sender cannot reorder the page around it
// any more than its ?name= can).
func validUserBytes(b []byte) bool {
	if len(b) > MaxUserLen {
		return false
	}
	for i, c := range b {
		switch {
		case c >= utf8.RuneSelf:
			return ValidUser(string(b))
		case c < 0x20 || c == 0x7f, c == ' ' && (i == 0 || i == len(b)-1):
			return false
		}
	}
	return true
}

func ValidUser(name string) bool {
	if len(name) > MaxUserLen || !utf8.ValidString(name) {
		return false
	}
	for i, r := range name {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return false
		}
		if unicode.IsSpace(r) && (i == 0 || i+utf8.RuneLen(r) == len(name)) {
			return false
		}
	}
	return true
}
