package protocol

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendChat appends to dst the broadcast of the chat message f, parsed by
// ParseFrame from data: "room", "seq" and "server_at" (RFC 3339, UTC, with
// microseconds), then every member of the client's object as the client
// wrote it, except "type", "room", "seq" and "server_at". room must be a
// valid room name.
func AppendChat(dst []byte, room string, seq uint64, serverAt time.Time, f *Frame, data []byte) []byte {
	dst, at := AppendChatDraft(dst, room, serverAt, f, data)
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], seq, 10)
	dst = append(dst, d...) // grow by the digits, then shift the tail right
	copy(dst[at+len(d):], dst[at:len(dst)-len(d)])
	copy(dst[at:], d)
	return dst
}

// AppendChatDraft appends the chat frame of AppendChat without its seq, and
// returns where the seq's digits belong: the frame for seq n is
// draft[:seqAt] + n + draft[seqAt:]. It lets a message be encoded before a
// cluster broker has given it its seq.
func AppendChatDraft(dst []byte, room string, serverAt time.Time, f *Frame, data []byte) (draft []byte, seqAt int) {
	dst = append(dst, `{"room":`...)
	dst = appendString(dst, room)
	dst = append(dst, `,"seq":`...)
	seqAt = len(dst)
	dst = append(dst, `,"server_at":"`...)
	dst = appendTime(dst, serverAt)
	dst = append(dst, '"')
	if f.SenderOverride != "" {
		dst = append(dst, `,"sender":`...)
		dst = appendString(dst, f.SenderOverride)
	}
	for _, s := range f.kept {
		dst = append(dst, ',')
		if s.raw {
			dst = append(dst, data[s.start:s.end]...)
			continue
		}
		dst = append(dst, data[s.start:s.keyEnd]...)
		dst = append(dst, ':')
		dst = append(dst, data[s.val:s.end]...)
	}
	return append(dst, '}'), seqAt
}

// AppendJoined appends a "joined" frame to dst; conn is the connection's
// id (for the server API), omitted when empty.
func AppendJoined(dst []byte, room, epoch string, seq uint64, members, history int, conn string) []byte {
	dst = append(dst, `{"type":"joined","room":`...)
	dst = appendString(dst, room)
	dst = append(dst, `,"epoch":`...)
	dst = appendString(dst, epoch)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"members":`...)
	dst = strconv.AppendInt(dst, int64(members), 10)
	dst = append(dst, `,"history":`...)
	dst = strconv.AppendInt(dst, int64(history), 10)
	if conn != "" {
		dst = append(dst, `,"connection":`...)
		dst = appendString(dst, conn)
	}
	return append(dst, '}')
}

// AppendLeft appends a "left" frame to dst.
func AppendLeft(dst []byte, room string, seq uint64) []byte {
	dst = append(dst, `{"type":"left","room":`...)
	dst = appendString(dst, room)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	return append(dst, '}')
}

// AppendHistoryGap appends a "history_gap" frame to dst.
//
// reset says since belongs to another stream of the room (another epoch,
// or a seq the stream never reached): the replay is all the room holds.
func AppendHistoryGap(dst []byte, room string, since, firstSeq uint64, reset bool) []byte {
	dst = append(dst, `{"type":"history_gap","room":`...)
	dst = appendString(dst, room)
	dst = append(dst, `,"since":`...)
	dst = strconv.AppendUint(dst, since, 10)
	dst = append(dst, `,"first_seq":`...)
	dst = strconv.AppendUint(dst, firstSeq, 10)
	if reset {
		dst = append(dst, `,"reset":true`...)
	}
	return append(dst, '}')
}

// AppendError appends an "error" frame to dst. f, when not nil, is the
// refused frame: its "message_id" and "room" are echoed when it had valid
// ones.
func AppendError(dst []byte, code, message string, f *Frame) []byte {
	dst = append(dst, `{"type":"error","code":`...)
	dst = appendString(dst, code)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, message)
	if f != nil {
		if f.HasMessageID {
			dst = append(dst, `,"message_id":`...)
			dst = strconv.AppendUint(dst, f.MessageID, 10)
		}
		if f.Room != nil {
			dst = append(dst, `,"room":`...)
			dst = appendString(dst, string(f.Room)) // no allocation: the conversion does not escape
		}
	}
	return append(dst, '}')
}

// appendTime appends t as RFC 3339 in UTC with exactly six fractional
// digits, e.g. 2026-11-21T10:00:00.124031Z.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000000Z07:00")
	}
	hour, minute, sec := t.Clock()
	us := t.Nanosecond() / 1000
	var b [27]byte
	put := func(i, v, width int) {
		for j := i + width - 1; j >= i; j-- {
			b[j] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, year, 4)
	b[4] = '-'
	put(5, int(month), 2)
	b[7] = '-'
	put(8, day, 2)
	b[10] = 'T'
	put(11, hour, 2)
	b[13] = ':'
	put(14, minute, 2)
	b[16] = ':'
	put(17, sec, 2)
	b[19] = '.'
	put(20, us, 6)
	b[26] = 'Z'
	return append(dst, b[:]...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD so
// that the frame stays a valid text message.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// UserCount is a user present in a room and its connections there.
type UserCount struct {
	User        string
	Connections int
}

// AppendPresenceUsers appends a "presence" frame to dst: the room's
// connections across the cluster, who is there (users sorted by name) and
// how many connections gave no user.
func AppendPresenceUsers(dst []byte, room string, members int, users []UserCount, anonymous int) []byte {
	dst = append(dst, `{"type":"presence","room":`...)
	dst = appendString(dst, room)
	dst = append(dst, `,"members":`...)
	dst = strconv.AppendInt(dst, int64(members), 10)
	dst = append(dst, `,"users":[`...)
	for i, u := range users {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"user":`...)
		dst = appendString(dst, u.User)
		dst = append(dst, `,"connections":`...)
		dst = strconv.AppendInt(dst, int64(u.Connections), 10)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"anonymous":`...)
	dst = strconv.AppendInt(dst, int64(anonymous), 10)
	return append(dst, '}')
}

// AppendPresenceEvent appends a "presence_join" (joined true) or
// "presence_leave" frame to dst: user's first connection to the room came,
// or its last one went.
func AppendPresenceEvent(dst []byte, room, user string, joined bool) []byte {
	if joined {
		dst = append(dst, `{"type":"presence_join","room":`...)
	} else {
		dst = append(dst, `{"type":"presence_leave","room":`...)
	}
	dst = appendString(dst, room)
	dst = append(dst, `,"user":`...)
	dst = appendString(dst, user)
	return append(dst, '}')
}
