// Package protocol implements scalechat's wire format (docs/protocol.md):
// it validates the JSON object of every client frame and encodes every
// frame the server sends.
//
// Both directions sit on the server's hot path, so the package uses neither
// encoding/json nor reflection and does not allocate per call: ParseFrame is
// a hand-written scanner that records where the client's fields lie in the
// frame, and AppendChat copies them from there into the broadcast frame.
package protocol

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is what a client frame asks for.
type Kind uint8

// Kinds of client frames.
const (
	KindMessage  Kind = iota // a chat message: no "type", or "type":"message"
	KindJoin                 // {"type":"join","room":...}
	KindLeave                // {"type":"leave","room":...}
	KindPresence             // {"type":"presence","room":...}
)

func (k Kind) String() string {
	switch k {
	case KindMessage:
		return "message"
	case KindJoin:
		return "join"
	case KindLeave:
		return "leave"
	case KindPresence:
		return "presence"
	}
	return "unknown"
}

// Limits on a client frame.
const (
	// MaxDepth is the deepest nesting of JSON objects and arrays in a frame,
	// the frame's own object included. It bounds the work and memory spent
	// on a hostile frame; chat clients never come near it.
	MaxDepth = 64
	// MaxSenderLen is the longest "sender", in bytes after unescaping.
	MaxSenderLen = 64
)

// Error codes of the error frame (docs/protocol.md). ParseFrame returns the
// first four; the server decides the others.
const (
	CodeInvalidJSON    = "invalid_json"
	CodeInvalidMessage = "invalid_message"
	CodeUnknownType    = "unknown_type"
	CodeInvalidRoom    = "invalid_room"
	CodeNotJoined      = "not_joined"
	CodeAlreadyJoined  = "already_joined"
	CodeTooManyRooms   = "too_many_rooms"
	CodeRateLimited    = "rate_limited"
)

// Error is a refused client frame. Code is one of the error codes of
// docs/protocol.md and Message one sentence for the user; both go into the
// error frame the server answers with.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return "protocol: " + e.Code + ": " + e.Message }

// The refusals ParseFrame returns. They are allocated once so that refusing a
// frame costs no more than accepting one; callers must not modify them.
var (
	errNotObject  = &Error{CodeInvalidJSON, "the frame is not a JSON object"}
	errSyntax     = &Error{CodeInvalidJSON, "the frame is not valid JSON"}
	errTooDeep    = &Error{CodeInvalidMessage, "the frame nests objects or arrays more than 64 deep"}
	errTooLarge   = &Error{CodeInvalidMessage, "the frame is too large"}
	errDuplicate  = &Error{CodeInvalidMessage, "a field appears more than once"}
	errTypeString = &Error{CodeInvalidMessage, "type must be a string"}
	errType       = &Error{CodeUnknownType, "type must be join, leave or presence, or absent for a chat message"}
	errRoom       = &Error{CodeInvalidRoom, "room must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"}
	errNoRoom     = &Error{CodeInvalidMessage, "room is required"}
	errMessageID  = &Error{CodeInvalidMessage, "message_id must be an integer from 0 to 18446744073709551615"}
	errNoText     = &Error{CodeInvalidMessage, "text is required"}
	errText       = &Error{CodeInvalidMessage, "text must be a string"}
	errSender     = &Error{CodeInvalidMessage, "sender must be a string of at most 64 bytes"}
	errSentAt     = &Error{CodeInvalidMessage, "sent_at must be a string"}
	errSince      = &Error{CodeInvalidMessage, "since must be an integer from 0 to 18446744073709551615"}
)

// Frame is one parsed client frame. A Frame is meant to be reused: ParseFrame
// overwrites it, and keeps its internal buffer so that parsing does not
// allocate once the buffer has grown to the frames seen.
type Frame struct {
	Kind Kind
	// Room is the value of "room", unescaped, or nil when the frame has no
	// valid "room". It may alias the parsed data or the Frame itself, so it
	// is valid until the next ParseFrame with this Frame or a change to data.
	Room []byte
	// HasSince and Since hold the "since" of a join.
	HasSince bool
	Since    uint64
	// HasMessageID and MessageID hold the "message_id" of the frame.
	HasMessageID bool
	MessageID    uint64

	// SenderOverride, when set by the caller, is the sender of every chat
	// message parsed into this Frame (the authenticated user): the client's
	// own "sender" is dropped and AppendChat writes this one. ParseFrame
	// does not reset it.
	SenderOverride string

	// kept lists, in order, the members of the client's object that a chat
	// broadcast copies: runs of members as offsets into the parsed data.
	kept    []span
	roomBuf [MaxRoomLen]byte
}

// span is a run of one or more members of the client's object. When raw is
// set, data[start:end] is copied as is (members already written compactly:
// key, ':', value, ',' and so on, nothing else); otherwise it is one member
// whose key is data[start:keyEnd] and value data[val:end].
type span struct {
	start, keyEnd, val, end uint32
	raw                     bool
}

// Keys ParseFrame knows. Their values are checked; the others are kept.
const (
	keyOther = iota
	keyType
	keyRoom
	keyMessageID
	keyText
	keySender
	keySentAt
	keySince
	keySeq
	keyServerAt
	numKeys
)

// Sets of keys, as bit masks, for duplicate detection: a key may appear once
// when the frame's kind gives it a meaning.
const (
	keysAlways  = 1<<keyType | 1<<keyRoom | 1<<keyMessageID
	keysMessage = keysAlways | 1<<keyText | 1<<keySender | 1<<keySentAt
	keysJoin    = keysAlways | 1<<keySince
)

// keysDropped are the members a chat broadcast does not copy: the server
// writes its own room, seq and server_at, and a chat frame has no type.
const keysDropped = 1<<keyType | 1<<keyRoom | 1<<keySeq | 1<<keyServerAt

// maxData bounds the frame size so that offsets fit in a span.
const maxData = math.MaxUint32

// ParseFrame validates data, one complete WebSocket text message (already
// checked to be UTF-8), as one JSON object (RFC 8259) and fills f. It does
// not allocate, apart from growing f's buffer the first times it meets a
// chat message with more fields than before.
//
// A refused frame yields an *Error whose Code is invalid_json, invalid_message,
// unknown_type or invalid_room. Unless the frame is not valid JSON, f still
// holds its valid "message_id" and "room" then, for the error frame.
//
// After an accepted chat message, AppendChat(..., f, data) re-emits the
// client's fields from data: data must not change in between.
func ParseFrame(data []byte, f *Frame) error {
	f.Kind = KindMessage
	f.Room = nil
	f.HasSince, f.Since = false, 0
	f.HasMessageID, f.MessageID = false, 0
	f.kept = f.kept[:0]
	if uint64(len(data)) > maxData {
		return errTooLarge
	}

	dropped := uint32(keysDropped)
	if f.SenderOverride != "" {
		dropped |= 1 << keySender
	}
	var (
		vals      [numKeys][2]int // value of each known key: start, end
		seen, dup uint32
		member    int // index of the current member in the object
		lastKept  = -2
	)
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return errNotObject
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for ; ; member++ {
			if i >= len(data) || data[i] != '"' {
				return errSyntax
			}
			ks := i
			var esc, ok bool
			if i, esc, ok = scanString(data, i); !ok {
				return errSyntax
			}
			ke := i
			i = skipSpace(data, i)
			if i >= len(data) || data[i] != ':' {
				return errSyntax
			}
			i = skipSpace(data, i+1)
			vs := i
			var err *Error
			if i, err = skipValue(data, i); err != nil {
				return err
			}
			ve := i

			k := keyOf(data[ks+1:ke-1], esc)
			if k != keyOther {
				if seen&(1<<k) != 0 {
					dup |= 1 << k
				}
				seen |= 1 << k
				vals[k] = [2]int{vs, ve}
			}
			if dropped&(1<<k) == 0 {
				n := len(f.kept)
				compact := vs == ke+1
				if lastKept == member-1 && compact && f.kept[n-1].raw &&
					int(f.kept[n-1].end)+1 == ks && data[ks-1] == ',' {
					f.kept[n-1].end = uint32(ve)
				} else {
					f.kept = append(f.kept, span{uint32(ks), uint32(ke), uint32(vs), uint32(ve), compact})
				}
				lastKept = member
			}

			i = skipSpace(data, i)
			if i >= len(data) {
				return errSyntax
			}
			if data[i] == '}' {
				i++
				break
			}
			if data[i] != ',' {
				return errSyntax
			}
			i = skipSpace(data, i+1)
		}
	}
	if skipSpace(data, i) != len(data) {
		return errSyntax
	}

	// The frame is valid JSON. Take message_id and room first: error frames
	// echo them whatever else is wrong.
	value := func(k int) []byte { return data[vals[k][0]:vals[k][1]] }
	var roomErr, idErr *Error
	if seen&(1<<keyRoom) != 0 {
		roomErr = f.setRoom(value(keyRoom))
	}
	if seen&(1<<keyMessageID) != 0 {
		if f.MessageID, f.HasMessageID = parseUint(value(keyMessageID)); !f.HasMessageID {
			idErr = errMessageID
		}
	}

	known := uint32(keysMessage)
	if seen&(1<<keyType) != 0 {
		if dup&(1<<keyType) != 0 {
			return errDuplicate
		}
		v := value(keyType)
		if v[0] != '"' {
			return errTypeString
		}
		var buf [8]byte
		n, ok := unescape(buf[:], v[1:len(v)-1])
		if !ok {
			return errType
		}
		switch string(buf[:n]) {
		case "message":
			f.Kind = KindMessage
		case "join":
			f.Kind, known = KindJoin, keysJoin
		case "leave":
			f.Kind, known = KindLeave, keysAlways
		case "presence":
			f.Kind, known = KindPresence, keysAlways
		default:
			return errType
		}
	}
	switch {
	case dup&known != 0:
		return errDuplicate
	case roomErr != nil:
		return roomErr
	case idErr != nil:
		return idErr
	}

	if f.Kind != KindMessage {
		if f.Room == nil {
			return errNoRoom
		}
		if f.Kind == KindJoin && seen&(1<<keySince) != 0 {
			if f.Since, f.HasSince = parseUint(value(keySince)); !f.HasSince {
				return errSince
			}
		}
		return nil
	}

	if seen&(1<<keyText) == 0 {
		return errNoText
	}
	if value(keyText)[0] != '"' {
		return errText
	}
	if seen&(1<<keySender) != 0 {
		v := value(keySender)
		var buf [MaxSenderLen]byte
		if v[0] != '"' {
			return errSender
		}
		if _, ok := unescape(buf[:], v[1:len(v)-1]); !ok {
			return errSender
		}
	}
	if seen&(1<<keySentAt) != 0 && value(keySentAt)[0] != '"' {
		return errSentAt
	}
	return nil
}

// setRoom sets f.Room from the JSON value v of "room".
func (f *Frame) setRoom(v []byte) *Error {
	if len(v) < 2 || v[0] != '"' {
		return errRoom
	}
	s := v[1 : len(v)-1]
	for _, c := range s {
		if c == '\\' {
			n, ok := unescape(f.roomBuf[:], s)
			if !ok {
				return errRoom
			}
			s = f.roomBuf[:n]
			break
		}
	}
	if !ValidRoom(s) {
		return errRoom
	}
	f.Room = s
	return nil
}

// keyOf identifies the key k (a JSON string's content, escaped when esc).
func keyOf(k []byte, esc bool) int {
	if esc {
		var buf [16]byte
		n, ok := unescape(buf[:], k)
		if !ok {
			return keyOther
		}
		k = buf[:n]
	}
	switch string(k) {
	case "type":
		return keyType
	case "room":
		return keyRoom
	case "message_id":
		return keyMessageID
	case "text":
		return keyText
	case "sender":
		return keySender
	case "sent_at":
		return keySentAt
	case "since":
		return keySince
	case "seq":
		return keySeq
	case "server_at":
		return keyServerAt
	}
	return keyOther
}

// parseUint parses v, a valid JSON number, as an unsigned 64-bit integer
// written without sign, fraction or exponent.
func parseUint(v []byte) (uint64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue checks the JSON value at data[i] and returns the offset after it.
func skipValue(data []byte, i int) (int, *Error) {
	if i >= len(data) {
		return 0, errSyntax
	}
	var ok bool
	switch c := data[i]; c {
	case '"':
		i, _, ok = scanString(data, i)
	case '{', '[':
		return skipNested(data, i)
	case 't':
		i, ok = literal(data, i, "true")
	case 'f':
		i, ok = literal(data, i, "false")
	case 'n':
		i, ok = literal(data, i, "null")
	default:
		i, ok = scanNumber(data, i)
	}
	if !ok {
		return 0, errSyntax
	}
	return i, nil
}

func literal(data []byte, i int, lit string) (int, bool) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// skipScalar checks the string, number or literal at data[i].
func skipScalar(data []byte, i int) (int, bool) {
	switch data[i] {
	case '"':
		i, _, ok := scanString(data, i)
		return i, ok
	case 't':
		return literal(data, i, "true")
	case 'f':
		return literal(data, i, "false")
	case 'n':
		return literal(data, i, "null")
	}
	return scanNumber(data, i)
}

// skipNested checks the object or array at data[i], a value of a member of
// the frame's object, and returns the offset after it. It keeps its own
// stack, one bit per level, rather than recursing, so a hostile frame costs
// no goroutine stack.
func skipNested(data []byte, i int) (int, *Error) {
	const maxNested = MaxDepth - 1 // the frame's object is the first level
	var (
		isObj uint64 // bit d: level d is an object
		depth int
		after bool // just past a value: expect ',' or a closing bracket
	)
	// key checks the member name and colon at data[i] and returns the offset
	// of the member's value.
	key := func(i int) (int, bool) {
		if i >= len(data) || data[i] != '"' {
			return 0, false
		}
		i, _, ok := scanString(data, i)
		if !ok {
			return 0, false
		}
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ':' {
			return 0, false
		}
		return skipSpace(data, i+1), true
	}
	for {
		if !after {
			if i >= len(data) {
				return 0, errSyntax
			}
			c := data[i]
			if c == '{' || c == '[' {
				if depth == maxNested {
					return 0, errTooDeep
				}
				closer := byte(']')
				if c == '{' {
					isObj |= 1 << depth
					closer = '}'
				} else {
					isObj &^= 1 << depth
				}
				depth++
				i = skipSpace(data, i+1)
				if i < len(data) && data[i] == closer {
					i++
					depth--
					if depth == 0 {
						return i, nil
					}
					after = true
					continue
				}
				if c == '{' {
					var ok bool
					if i, ok = key(i); !ok {
						return 0, errSyntax
					}
				}
				continue
			}
			var ok bool
			if i, ok = skipScalar(data, i); !ok {
				return 0, errSyntax
			}
		}
		after = false
		i = skipSpace(data, i)
		if i >= len(data) {
			return 0, errSyntax
		}
		obj := isObj&(1<<(depth-1)) != 0
		switch c := data[i]; {
		case c == ',':
			i = skipSpace(data, i+1)
			if obj {
				var ok bool
				if i, ok = key(i); !ok {
					return 0, errSyntax
				}
			}
		case c == '}' && obj, c == ']' && !obj:
			i++
			depth--
			if depth == 0 {
				return i, nil
			}
			after = true
		default:
			return 0, errSyntax
		}
	}
}

// scanNumber checks the JSON number at data[i] and returns the offset after
// it.
func scanNumber(data []byte, i int) (int, bool) {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return 0, false
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i++
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	default:
		return 0, false
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return 0, false
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return 0, false
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i, true
}

// scanString checks the JSON string whose opening quote is data[i]. It
// returns the offset after the closing quote and whether the string holds
// escapes. It does not check UTF-8: the WebSocket layer has.
func scanString(data []byte, i int) (end int, esc, ok bool) {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	i++
	for {
		// Skip eight plain bytes at a time: a byte is special when it is
		// a quote, a backslash or a control character. The lowest flagged
		// byte of each test is exact (borrows only run upwards).
		for i+8 <= len(data) {
			x := binary.LittleEndian.Uint64(data[i:])
			q := x ^ (ones * '"')
			b := x ^ (ones * '\\')
			t := ((x - ones*0x20) &^ x) | ((q - ones) &^ q) | ((b - ones) &^ b)
			if t &= high; t != 0 {
				i += bits.TrailingZeros64(t) >> 3
				break
			}
			i += 8
		}
		if i >= len(data) {
			return 0, false, false
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(data) {
				return 0, false, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return 0, false, false
				}
				if _, ok := hex4(data[i+2 : i+6]); !ok {
					return 0, false, false
				}
				i += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		default:
			i++
		}
	}
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape writes the content s of a JSON string, already checked by
// scanString, to dst without its escapes, as encoding/json decodes it (a lone
// surrogate becomes U+FFFD). It returns the length written, or false when
// dst is too small.
func unescape(dst, s []byte) (int, bool) {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			if n == len(dst) {
				return n, false
			}
			dst[n] = c
			n++
			i++
			continue
		}
		var r rune
		switch c := s[i+1]; c {
		case 'u':
			r, _ = hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(utf8.RuneError)
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2, _ = hex4(s[i+2 : i+6])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
		case 'b':
			r, i = '\b', i+2
		case 'f':
			r, i = '\f', i+2
		case 'n':
			r, i = '\n', i+2
		case 'r':
			r, i = '\r', i+2
		case 't':
			r, i = '\t', i+2
		default: // '"', '\\' or '/'
			r, i = rune(c), i+2
		}
		if n+utf8.RuneLen(r) > len(dst) {
			return n, false
		}
		n += utf8.EncodeRune(dst[n:], r)
	}
	return n, true
}
