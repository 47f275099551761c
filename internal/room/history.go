package room

// Message is one published chat message: its sequence number in the room and
// the complete WebSocket frame every member is sent. Frame is immutable once
// published, so one encoding is shared by all members and by the history.
type Message struct {
	Seq   uint64
	Frame []byte
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

func (h *history) add(m Message) (grew bool) {
	if h.limit == 0 {
		return false
	}
	if len(h.ring) < h.limit {
		// Not full yet: start is 0 and n is len(ring).
		h.ring = append(h.ring, m)
		h.n++
		return true
	}
	h.ring[h.start] = m
	h.start = (h.start + 1) % len(h.ring)
	return false
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
