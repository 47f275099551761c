// Package room holds the chat rooms of one node: who is in each room (per
// event loop), the room's sequence numbers and its bounded history, and the
// fan-out of each published message to the event loops that have members.
//
// A message flows: a loop reads a frame and calls Room.Publish, which under
// the room's lock assigns the next seq, stores the encoded frame in the
// history ring and pushes one Delivery to the Queue of every loop with local
// members; each loop then writes the frame to its members. Rooms never touch
// connections, and loops never take a room's lock while delivering.
package room

import (
	"sync"
	"time"
)

// Room is one chat room on this node.
type Room struct {
	name string
	hub  *Hub

	mu         sync.Mutex
	seq        uint64
	hist       history
	local      []int32 // members per event loop, indexed like Hub.queues
	members    int
	emptySince time.Time
	closed     bool // freed by the hub: joiners must look the room up again
}

// Name returns the room's name.
func (r *Room) Name() string { return r.name }

// Publish assigns the next seq, lets encode build the message's frame for
// that seq, appends it to the history and queues it for every loop with
// members, all in one critical section: that is what gives every member the
// room's messages in one order. encode must not call back into the room.
// received (unix nanoseconds) is when the message was read; it travels with
// the deliveries so that loops can measure the processing time.
func (r *Room) Publish(received int64, encode func(seq uint64) []byte) uint64 {
	r.mu.Lock()
	r.seq++
	m := Message{Seq: r.seq, Frame: encode(r.seq)}
	if r.hist.add(m) {
		r.hub.historyEntries.Add(1)
	}
	for i, n := range r.local {
		if n > 0 {
			r.hub.queues[i].push(Delivery{Room: r, Message: m, Received: received})
		}
	}
	r.mu.Unlock()
	return m.Seq
}

// JoinResult describes the room as a new member finds it.
type JoinResult struct {
	Seq      uint64    // latest seq: later messages come through the loop's queue
	Members  int       // members after joining, this one included
	History  []Message // the messages to replay, in seq order, all with Seq ≤ the Seq field
	Gap      bool      // since asked for messages that are no longer held
	FirstSeq uint64    // oldest seq held (0 when none), meaningful with Gap
}

// join adds a member on loop. It reports false when the room was freed
// meanwhile and must be looked up again.
func (r *Room) join(loop int, since uint64, hasSince bool, dst []Message) (JoinResult, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return JoinResult{}, false
	}
	r.local[loop]++
	r.members++
	res := JoinResult{Seq: r.seq, Members: r.members, FirstSeq: r.hist.oldest()}
	switch {
	case !hasSince:
		res.History = r.hist.appendLast(dst, r.hist.n)
	case since > r.seq:
		// The client saw a previous life of this room: replay all we hold.
		res.Gap = true
		res.History = r.hist.appendLast(dst, r.hist.n)
	default:
		res.Gap = since < r.seq && (r.hist.n == 0 || since+1 < res.FirstSeq)
		res.History = r.hist.appendSince(dst, since)
	}
	return res, true
}

// Leave removes a member on loop and returns the room's latest seq: the
// loop delivers it nothing newer.
func (r *Room) Leave(loop int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.local[loop]--
	r.members--
	if r.members == 0 {
		r.emptySince = time.Now()
	}
	return r.seq
}

// Members returns the number of members on this node.
func (r *Room) Members() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.members
}

// Seq returns the room's latest seq.
func (r *Room) Seq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}
