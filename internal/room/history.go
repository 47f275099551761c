package room

import "unsafe"

// entry is a message as the history keeps it: 24 bytes beside its buffer,
// where a Message takes 48, since a node holds up to --history of them per
// room. The buffer's slice is rebuilt from its first byte, its length and
// its spare capacity (the allocator rounds a buffer up by less than a
// page, so spare fits 16 bits).
type entry struct {
	data  *byte
	seq   uint64
	n     uint32 // len of the buffer
	spare uint16 // cap - len
	head  uint8  // bytes before the JSON
}

// entrySize is what an entry costs beside its buffer: its slot in the ring.
const entrySize = int64(unsafe.Sizeof(entry{}))

// zSize is what a message costs beside it when the hub compresses: its
// slot in the ring of compressed encodings and the cell its compressed
// encoding is made in (the allocator's 48-byte class). The compressed bytes
// are made later by a loop, and are not counted.
const zSize = int64(unsafe.Sizeof((*encoded)(nil))) + 48

func toEntry(m Message) entry {
	if m.data == nil {
		return entry{seq: m.Seq}
	}
	return entry{data: unsafe.SliceData(m.data), seq: m.Seq, n: uint32(len(m.data)), spare: uint16(cap(m.data) - len(m.data)), head: uint8(m.head)}
}

func (e entry) message(z *encoded) Message {
	if e.data == nil {
		return Message{Seq: e.seq, z: z}
	}
	data := unsafe.Slice(e.data, int(e.n)+int(e.spare))[:e.n]
	return Message{Seq: e.seq, data: data, head: int(e.head), z: z}
}

// history is a fixed-size ring of a room's latest messages. Its memory is
// bounded by its capacity however long the room lives.
type history struct {
	ring  []entry    // grows up to limit, then wraps
	zs    []*encoded // beside ring when the hub compresses: each message's compressed encoding
	limit int
	start int // index of the oldest message
	n     int // messages held
	z     bool
}

func newHistory(limit int, compress bool) history {
	return history{limit: max(limit, 0), z: compress}
}

// cost returns the bytes e costs the history: its buffer as allocated (its
// capacity is the allocator's size class, see Hub.alloc) and its slot, and
// with compression the slot and cell of its compressed encoding.
func (h *history) cost(e entry) int64 {
	if e.data == nil && e.seq == 0 {
		return 0
	}
	c := entrySize + int64(e.n) + int64(e.spare)
	if h.z {
		c += zSize
	}
	return c
}

// jsonLen returns the bytes of e's JSON.
func (e entry) jsonLen() int64 { return int64(e.n) - int64(e.head) }

func (h *history) set(i int, m Message) {
	h.ring[i] = toEntry(m)
	if h.z {
		h.zs[i] = m.z
	}
}

func (h *history) get(i int) Message {
	if h.z {
		return h.ring[i].message(h.zs[i])
	}
	return h.ring[i].message(nil)
}

// add appends m, and reports whether the history grew, and the entry it
// evicted to make room (zero when none): the caller only counts what that
// cost, so it is not made a Message again.
func (h *history) add(m Message) (grew bool, evicted entry) {
	if h.limit == 0 {
		return false, entry{}
	}
	if len(h.ring) < h.limit && h.start == 0 && h.n == len(h.ring) {
		// Still growing: the ring is in order from index 0 and full. It
		// grows by doubling but never past limit, so that a full ring
		// holds no slot it cannot use.
		if len(h.ring) == cap(h.ring) {
			h.ring = grow(h.ring, h.limit)
			if h.z {
				h.zs = grow(h.zs, h.limit)
			}
		}
		h.ring = append(h.ring, entry{})
		if h.z {
			h.zs = append(h.zs, nil)
		}
		h.set(len(h.ring)-1, m)
		h.n++
		return true, entry{}
	}
	if h.n < len(h.ring) { // room left by dropOldest
		h.set((h.start+h.n)%len(h.ring), m)
		h.n++
		return true, entry{}
	}
	evicted = h.ring[h.start]
	h.set(h.start, m)
	h.advance()
	return false, evicted
}

// advance moves start to the next slot of the ring (a compare, not the
// division a modulo costs on every publish).
func (h *history) advance() {
	if h.start++; h.start == len(h.ring) {
		h.start = 0
	}
}

// grow returns s with room for twice its length, at least 8 and at most
// limit.
func grow[S ~[]E, E any](s S, limit int) S {
	n := min(max(2*len(s), 8), limit)
	t := make(S, len(s), n)
	copy(t, s)
	return t
}

// dropOldest removes the oldest message and returns its entry (zero when
// empty).
func (h *history) dropOldest() entry {
	if h.n == 0 {
		return entry{}
	}
	m := h.ring[h.start]
	h.set(h.start, Message{})
	h.advance()
	h.n--
	return m
}

// oldest returns the seq of the oldest message held, or 0 when empty.
func (h *history) oldest() uint64 {
	if h.n == 0 {
		return 0
	}
	return h.ring[h.start].seq
}

// appendSince appends to dst the messages with a seq greater than since, in
// order, and returns it.
func (h *history) appendSince(dst []Message, since uint64) []Message {
	if h.n == 0 {
		return dst
	}
	first := h.ring[h.start].seq
	skip := 0
	if since >= first {
		skip = int(since - first + 1)
	}
	for i := skip; i < h.n; i++ {
		dst = append(dst, h.get((h.start+i)%len(h.ring)))
	}
	return dst
}

// appendLast appends the last k messages held (all when k ≥ held).
func (h *history) appendLast(dst []Message, k int) []Message {
	if k > h.n {
		k = h.n
	}
	for i := h.n - k; i < h.n; i++ {
		dst = append(dst, h.get((h.start+i)%len(h.ring)))
	}
	return dst
}
