package room

import (
	"sync"

	"github.com/scalechat/scalechat/internal/ws"
)

// Message is one published chat message: its sequence number in the room and
// the complete WebSocket frame every member is sent. Frame is immutable once
// published, so one encoding is shared by all members and by the history.
type Message struct {
	Seq   uint64
	Frame []byte
	z     *deflated // nil unless the hub compresses
}

// deflated is a message's frame compressed (permessage-deflate), made the
// first time a member needs it and then shared like Frame.
type deflated struct {
	once  sync.Once
	frame []byte
}

// DeflatedFrame returns the frame to send to a connection that negotiated
// permessage-deflate: the message compressed once for every such member on
// every loop, or Frame itself when compression does not make it smaller or
// the hub does not compress.
func (m Message) DeflatedFrame() []byte {
	if m.z == nil {
		return m.Frame
	}
	m.z.once.Do(func() {
		_, hn, _ := ws.ParseHeader(m.Frame)
		if z := ws.DeflatedFrame(ws.OpText, m.Frame[hn:]); len(z) < len(m.Frame) {
			m.z.frame = z
		} else {
			m.z.frame = m.Frame
		}
	})
	return m.z.frame
}

// history is a fixed-size ring of a room's latest messages. Its memory is
// bounded by its capacity however long the room lives.
type history struct {
	ring  []Message // grows up to limit, then wraps
	limit int
	start int // index of the oldest message
	n     int // messages held
}

func newHistory(limit int) history { return history{limit: max(limit, 0)} }

// add appends m, and reports whether the history grew and how many bytes of
// frame it evicted to make room.
func (h *history) add(m Message) (grew bool, evicted int) {
	if h.limit == 0 {
		return false, 0
	}
	if len(h.ring) < h.limit && h.start == 0 && h.n == len(h.ring) {
		// Still growing: the ring is in order from index 0 and full.
		h.ring = append(h.ring, m)
		h.n++
		return true, 0
	}
	if h.n < len(h.ring) { // room left by dropOldest
		h.ring[(h.start+h.n)%len(h.ring)] = m
		h.n++
		return true, 0
	}
	evicted = len(h.ring[h.start].Frame)
	h.ring[h.start] = m
	h.start = (h.start + 1) % len(h.ring)
	return false, evicted
}

// dropOldest removes the oldest message and returns its frame's size.
func (h *history) dropOldest() int {
	if h.n == 0 {
		return 0
	}
	n := len(h.ring[h.start].Frame)
	h.ring[h.start] = Message{}
	h.start = (h.start + 1) % len(h.ring)
	h.n--
	return n
}

// oldest returns the seq of the oldest message held, or 0 when empty.
func (h *history) oldest() uint64 {
	if h.n == 0 {
		return 0
	}
	return h.ring[h.start].Seq
}

// appendSince appends to dst the messages with a seq greater than since, in
// order, and returns it.
func (h *history) appendSince(dst []Message, since uint64) []Message {
	if h.n == 0 {
		return dst
	}
	first := h.ring[h.start].Seq
	skip := 0
	if since >= first {
		skip = int(since - first + 1)
	}
	for i := skip; i < h.n; i++ {
		dst = append(dst, h.ring[(h.start+i)%len(h.ring)])
	}
	return dst
}

// appendLast appends the last k messages held (all when k ≥ held).
func (h *history) appendLast(dst []Message, k int) []Message {
	if k > h.n {
		k = h.n
	}
	for i := h.n - k; i < h.n; i++ {
		dst = append(dst, h.ring[(h.start+i)%len(h.ring)])
	}
	return dst
}
