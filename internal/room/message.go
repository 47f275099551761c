package room

import (
	"strconv"
	"sync"
)

// Message is one published chat message: its sequence number in the room
// and its JSON, behind the few bytes the transport sends before it (see
// Framing). Its bytes are immutable once published, so one copy is shared
// by every member on every loop and by the history.
type Message struct {
	Seq  uint64
	data []byte // head bytes, then the JSON; cap is what the allocator gave
	head int    // bytes of data before the JSON
	z    *encoded
}

// JSON returns the message as the chat protocol has it: what long polls
// and the server API serve.
func (m Message) JSON() []byte { return m.data[m.head:] }

// Framed returns the message with the transport's head before its JSON:
// the bytes a connection writes. Without a Framing it is the JSON.
func (m Message) Framed() []byte { return m.data }

// Compressed returns the message as compress encodes it for a connection
// that negotiated compression: encoded once, the first time any member on
// any loop needs it, and shared like the message. It is Framed when the hub
// does not compress. compress must be safe to call from any goroutine.
func (m Message) Compressed(compress func(Message) []byte) []byte {
	if m.z == nil {
		return m.data
	}
	m.z.once.Do(func() { m.z.b = compress(m) })
	return m.z.b
}

// encoded is a message's compressed encoding, made on first use.
type encoded struct {
	once sync.Once
	b    []byte
}

// Framing is what the transport sends before each message's JSON (a
// WebSocket frame header). The hub writes it once, when the message is
// made, in front of the JSON in the same buffer: a connection then writes
// the message as one piece, and no loop builds or copies anything per
// member. The rooms never read those bytes: they only make room for them.
type Framing interface {
	// HeadSize returns how many bytes go before a message of n bytes.
	HeadSize(n int) int
	// AppendHead appends them to dst.
	AppendHead(dst []byte, n int) []byte
}

// alloc returns an empty buffer for a message of n bytes of JSON with the
// framing's head already in it: a new one each time, never reused, so that
// a message's bytes can be handed on (history, keep, the webhooks) without
// a copy. Its capacity is the allocator's size class
// (see sizeClass), so that the history counts what the message really
// costs.
func (h *Hub) alloc(n int) []byte {
	if h.framing == nil {
		return make([]byte, 0, sizeClass(n))
	}
	return h.framing.AppendHead(make([]byte, 0, sizeClass(h.framing.HeadSize(n)+n)), n)
}

// draftMessage returns the message seq whose JSON is prefix, seq's digits,
// then suffix (a draft from protocol.AppendChatDraft): one allocation.
func (h *Hub) draftMessage(seq uint64, prefix, suffix []byte) Message {
	b := h.alloc(len(prefix) + digits(seq) + len(suffix))
	head := len(b)
	b = append(b, prefix...)
	b = strconv.AppendUint(b, seq, 10)
	return Message{Seq: seq, data: append(b, suffix...), head: head}
}

// jsonMessage returns the message seq whose JSON is a copy of json (a
// payload the broker brought).
func (h *Hub) jsonMessage(seq uint64, json []byte) Message {
	b := h.alloc(len(json))
	head := len(b)
	return Message{Seq: seq, data: append(b, json...), head: head}
}

// digits returns the number of decimal digits of n.
func digits(n uint64) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}
