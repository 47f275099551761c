package room

import (
	"slices"
	"time"
)

// Long polls (the server's HTTP transport) wait on rooms without being
// members. A poll of a room this node does not hold must open it (in a
// cluster, load it from Redis), but it must not leave it behind: a client
// polling made-up names would otherwise fill the node with rooms. So a
// poll counts as a poller of its room while it waits (a room with pollers
// is not freed), and when the last poller of a room that holds nothing
// leaves (no message ever, no member, no joiner waiting), the room is
// freed at once. A room that holds messages stays for the grace period
// after its last poll, as after its last member, so that clients polling
// one after the other keep its history.

// OpenPoll returns the room called name, creating it if needed, with one
// more poller; nil when it does not exist and the node holds as many rooms
// as it may. Each OpenPoll must be followed by one LeavePoll.
func (h *Hub) OpenPoll(name []byte) *Room {
	for {
		r := h.Open(name)
		if r == nil {
			return nil
		}
		r.mu.Lock()
		if !r.closed { // freed between Open and here: open it again
			r.pollers++
			r.mu.Unlock()
			return r
		}
		r.mu.Unlock()
	}
}

// LeavePoll ends a poll of r begun with OpenPoll. The last poller of a
// room that holds nothing frees it.
func (h *Hub) LeavePoll(r *Room) {
	s := h.shard([]byte(r.name))
	s.mu.Lock()
	r.mu.Lock()
	r.pollers--
	r.lastPoll = time.Now()
	free := r.pollers == 0 && !r.closed && r.unusedLocked() && s.rooms[r.name] == r
	if free {
		h.freeLocked(s, r)
	}
	r.mu.Unlock()
	s.mu.Unlock()
	if free {
		h.rooms.Add(-1)
		s.flush(h.broker)
	}
}

// unusedLocked reports whether r holds nothing a later client could want:
// no member, no joiner waiting for it to load, no message ever. (Owned, it
// is released: with no message ever, there is nothing to hand on.)
// A publish of it on its way to another node's order keeps nothing here:
// its answer goes to its publisher (Hub.Settled), not to the room.
func (r *Room) unusedLocked() bool {
	return r.members == 0 && r.seq == 0 && r.hist.n == 0 && len(r.early) == 0 && !r.joinersWaitingLocked()
}

// joinersWaitingLocked reports whether a loop has joiners waiting for the
// room to load (or for its owner's lease to be checked).
func (r *Room) joinersWaitingLocked() bool {
	return slices.Contains(r.waiting, true)
}
