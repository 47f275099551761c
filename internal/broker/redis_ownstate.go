package broker

import (
	"sync"
	"sync/atomic"
)

// ownState is this node's state of room ownership (redis_own.go): the
// rooms Redis granted this node, the publishes held behind rooms another
// node holds, and with --room-order owner the followers and owners of
// rooms (follows, redis_followset.go). No step changes two of them
// together, nor holds the lock long: one lock serves all three. It is
// taken under a room's lock (keep, Follow's add), healthState.localMu
// (publishDown) and fillMu; it may be held while publisher.mu is taken
// (unblock), never the other way round; nothing else is taken under it.
type ownState struct {
	mu      sync.Mutex
	granted map[string]bool // the rooms Redis granted this node, not given up
	// blocked holds, per room that another node holds while this node has
	// it loaded, the publishes that wait until the holder released it
	// (Redis.block). A room's publishes leave in the order they came.
	blocked  map[string][]Publication
	nBlocked atomic.Int64 // len(blocked), read without the lock
	follows               // the owner protocol's followers, owners and forwards
}

func newOwnState() ownState {
	return ownState{granted: make(map[string]bool), blocked: make(map[string][]Publication), follows: newFollows()}
}

// grant records that Redis granted this node the room.
func (s *ownState) grant(room string) {
	s.mu.Lock()
	s.granted[room] = true
	s.mu.Unlock()
}

// holds reports whether the room is held here.
func (s *ownState) holds(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted[room]
}

// giveUp forgets the room's grant and reports whether it was held here.
func (s *ownState) giveUp(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.granted[room]
	delete(s.granted, room)
	return held
}

// heldRooms returns the rooms held here.
func (s *ownState) heldRooms() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rooms := make([]string, 0, len(s.granted))
	for r := range s.granted {
		rooms = append(rooms, r)
	}
	return rooms
}

// heldCount returns the number of rooms held here.
func (s *ownState) heldCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.granted)
}

// block makes the room blocked, with p (when not nil) waiting first after
// any already there; it reports whether the room was blocked already.
func (s *ownState) block(room string, p *Publication) (already bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, already := s.blocked[room]
	if p != nil {
		q = append(q, *p)
	}
	s.blocked[room] = q
	s.nBlocked.Store(int64(len(s.blocked)))
	return already
}

// holdBack queues p behind the others of its room when the room is blocked,
// and reports whether it did.
func (s *ownState) holdBack(p Publication) bool {
	if s.nBlocked.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.blocked[p.Room]
	if ok {
		s.blocked[p.Room] = append(q, p)
	}
	return ok
}

// divert takes out of batch the publishes of blocked rooms, queued behind
// the ones that wait there, and returns what is left (in batch's array).
func (s *ownState) divert(batch []job) []job {
	if s.nBlocked.Load() == 0 {
		return batch
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := batch[:0]
	for _, j := range batch {
		if j.kind == jobPublish {
			if q, ok := s.blocked[j.p.Room]; ok {
				s.blocked[j.p.Room] = append(q, j.p)
				continue
			}
		}
		kept = append(kept, j)
	}
	return kept
}

// unblock unblocks the room and hands its waiting publishes to queue,
// under the lock: a publish that comes once the room is no longer blocked
// is queued after them.
func (s *ownState) unblock(room string, queue func([]Publication)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.blocked[room]
	delete(s.blocked, room)
	s.nBlocked.Store(int64(len(s.blocked)))
	queue(q)
}

// unblockAll unblocks every room and returns the publishes that waited.
func (s *ownState) unblockAll() []Publication {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []Publication
	for room, q := range s.blocked {
		all = append(all, q...)
		delete(s.blocked, room)
	}
	s.nBlocked.Store(0)
	return all
}
