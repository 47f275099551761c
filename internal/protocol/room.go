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

// UserRule says what a user's name in presence is, for refusals.
const UserRule = "name must be at most 64 bytes of UTF-8 text without control characters"

// ValidUser reports whether name may name a user in presence: at most 64
// bytes of valid UTF-8 without control characters ("" names none).
func ValidUser(name string) bool {
	if len(name) > 64 || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
