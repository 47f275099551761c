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
	"math"
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

// Subprotocol is the WebSocket subprotocol (Sec-WebSocket-Protocol) of
// clients that want the control frames: joined, left, presence, history_gap
// and error. A client that does not offer it gets chat frames only and
// learns of a refusal from the close code (docs/protocol.md).
const Subprotocol = "scalechat.v1"

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
	CodeUnavailable    = "unavailable"
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
	errRoom       = &Error{CodeInvalidRoom, "room must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', '-' and ':' (not first or last)"}
	errNoRoom     = &Error{CodeInvalidMessage, "room is required"}
	errMessageID  = &Error{CodeInvalidMessage, "message_id must be an integer from 0 to 18446744073709551615"}
	errNoText     = &Error{CodeInvalidMessage, "text is required"}
	errText       = &Error{CodeInvalidMessage, "text must be a string"}
	errSender     = &Error{CodeInvalidMessage, "sender must be a valid user name: a string of at most 64 bytes without control or format characters nor white space at its ends"}
	errSentAt     = &Error{CodeInvalidMessage, "sent_at must be a string"}
	errSince      = &Error{CodeInvalidMessage, "since must be an integer from 0 to 18446744073709551615"}
	errEpoch      = &Error{CodeInvalidMessage, EpochRule}
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
	// HasSince and Since hold the "since" of a join, and Epoch the stream
	// it belongs to (empty when the join has none). Epoch aliases data.
	HasSince bool
	Since    uint64
	Epoch    []byte
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
	keyEpoch
	keySeq
	keyServerAt
	numKeys
)

// Sets of keys, as bit masks, for duplicate detection: a key may appear once
// when the frame's kind gives it a meaning.
const (
	keysAlways  = 1<<keyType | 1<<keyRoom | 1<<keyMessageID
	keysMessage = keysAlways | 1<<keyText | 1<<keySender | 1<<keySentAt
	keysJoin    = keysAlways | 1<<keySince | 1<<keyEpoch
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
	f.HasSince, f.Since, f.Epoch = false, 0, nil
	f.HasMessageID, f.MessageID = false, 0
	f.kept = f.kept[:0]
	if uint64(len(data)) > maxData {
		return errTooLarge
	}
	var m members
	if err := f.scanObject(data, &m); err != nil {
		return err
	}
	return f.check(data, &m)
}

// members is what scanning a frame's object found: where the value of each
// known key is, which keys came, and which came more than once.
type members struct {
	vals      [numKeys][2]int // start and end of each known key's value
	seen, dup uint32
}

func (m *members) value(data []byte, k int) []byte { return data[m.vals[k][0]:m.vals[k][1]] }

// scanObject checks that data is one JSON object, records where the known
// keys' values are, and keeps the spans of the members the broadcast frame
// carries over (every member but the ones the server sets or drops).
func (f *Frame) scanObject(data []byte, m *members) *Error {
	dropped := uint32(keysDropped)
	if f.SenderOverride != "" {
		dropped |= 1 << keySender
	}
	var (
		member   int // index of the current member in the object
		lastKept = -2
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
				if m.seen&(1<<k) != 0 {
					m.dup |= 1 << k
				}
				m.seen |= 1 << k
				m.vals[k] = [2]int{vs, ve}
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
	return nil
}

// check judges the members of a valid JSON object as a chat frame and
// fills f.
func (f *Frame) check(data []byte, m *members) error {
	// Take message_id and room first: error frames echo them whatever else
	// is wrong.
	var roomErr, idErr *Error
	if m.seen&(1<<keyRoom) != 0 {
		roomErr = f.setRoom(m.value(data, keyRoom))
	}
	if m.seen&(1<<keyMessageID) != 0 {
		if f.MessageID, f.HasMessageID = parseUint(m.value(data, keyMessageID)); !f.HasMessageID {
			idErr = errMessageID
		}
	}
	known, err := f.kind(data, m)
	switch {
	case err != nil:
		return err
	case m.dup&known != 0:
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
		if f.Kind == KindJoin && m.seen&(1<<keySince) != 0 {
			if f.Since, f.HasSince = parseUint(m.value(data, keySince)); !f.HasSince {
				return errSince
			}
		}
		if f.Kind == KindJoin && m.seen&(1<<keyEpoch) != 0 {
			v := m.value(data, keyEpoch)
			if len(v) < 2 || v[0] != '"' || !ValidEpoch(string(v[1:len(v)-1])) {
				return errEpoch
			}
			f.Epoch = v[1 : len(v)-1]
		}
		return nil
	}

	if m.seen&(1<<keyText) == 0 {
		return errNoText
	}
	if m.value(data, keyText)[0] != '"' {
		return errText
	}
	if m.seen&(1<<keySender) != 0 {
		v := m.value(data, keySender)
		var buf [MaxSenderLen]byte
		if v[0] != '"' {
			return errSender
		}
		if n, ok := unescape(buf[:], v[1:len(v)-1]); !ok || !validUserBytes(buf[:n]) {
			return errSender
		}
	}
	if m.seen&(1<<keySentAt) != 0 && m.value(data, keySentAt)[0] != '"' {
		return errSentAt
	}
	return nil
}

// kind sets f.Kind from "type" (a chat message without it) and returns the
// keys that frame kind knows.
func (f *Frame) kind(data []byte, m *members) (known uint32, err *Error) {
	if m.seen&(1<<keyType) == 0 {
		return keysMessage, nil
	}
	if m.dup&(1<<keyType) != 0 {
		return 0, errDuplicate
	}
	v := m.value(data, keyType)
	if v[0] != '"' {
		return 0, errTypeString
	}
	var buf [8]byte
	n, ok := unescape(buf[:], v[1:len(v)-1])
	if !ok {
		return 0, errType
	}
	switch string(buf[:n]) {
	case "message":
		f.Kind = KindMessage
		return keysMessage, nil
	case "join":
		f.Kind = KindJoin
		return keysJoin, nil
	case "leave":
		f.Kind = KindLeave
		return keysAlways, nil
	case "presence":
		f.Kind = KindPresence
		return keysAlways, nil
	}
	return 0, errType
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
	case "epoch":
		return keyEpoch
	case "seq":
		return keySeq
	case "server_at":
		return keyServerAt
	}
	return keyOther
}
