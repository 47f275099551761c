package room

import "github.com/scalechat/scalechat/internal/broker"

// Follow hands a node that starts to follow a room this node owns what it
// loads the room from: the room's epoch, latest seq and history, handed to
// add, which runs under the room's lock, where the room orders its messages, so that every
// message after seq reaches the follower (the broker's keep sends it on)
// and none before. It reports false when the room does not order here now
// (not loaded, or waiting for the seqs up to from, handed out before this
// node owned it): the follower asks again. The broker calls it only for a
// room it holds, under a live lease.
func (h *Hub) Follow(name string, from uint64, add func(epoch string, seq uint64, tail []broker.Entry)) (epoch string, seq uint64, tail []broker.Entry, ok bool) {
	r := h.lookup([]byte(name))
	if r == nil {
		return "", 0, nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ordersLocked(from) {
		return "", 0, nil, false
	}
	tail = r.tailLocked()
	add(r.epoch, r.seq, tail)
	return r.epoch, r.seq, tail, true
}

// tailLocked is the room's history as broker entries. Their payloads are
// the messages' own bytes, which nobody changes (a message's buffer is
// never reused: see Hub.alloc), so they outlive the history that held
// them.
func (r *Room) tailLocked() []broker.Entry {
	msgs := r.hist.appendLast(nil, r.hist.n)
	tail := make([]broker.Entry, len(msgs))
	for i, m := range msgs {
		tail[i] = broker.Entry{Seq: m.Seq, Payload: m.JSON()}
	}
	return tail
}
