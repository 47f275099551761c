package broker

import (
	"sync"
	"sync/atomic"
)

// The state of room ownership on this node (redis_own.go), in two parts
// that are never changed together, each under its own lock: the rooms
// Redis granted this node, and the publishes held behind rooms another node
// holds.

// grantSet is the rooms Redis granted this node and it has not given up.
// Its lock is a leaf.
type grantSet struct {
	mu   sync.Mutex
	held map[string]bool
}

func newGrantSet() grantSet { return grantSet{held: make(map[string]bool)} }

// add records that Redis granted this node the room.
func (g *grantSet) add(room string) {
	g.mu.Lock()
	g.held[room] = true
	g.mu.Unlock()
}

// has reports whether the room is held here.
func (g *grantSet) has(room string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[room]
}

// take forgets the room and reports whether it was held here.
func (g *grantSet) take(room string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	held := g.held[room]
	delete(g.held, room)
	return held
}

// rooms returns the rooms held here.
func (g *grantSet) rooms() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	rooms := make([]string, 0, len(g.held))
	for r := range g.held {
		rooms = append(rooms, r)
	}
	return rooms
}

// len returns the number of rooms held here.
func (g *grantSet) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

// blockSet holds, per room that another node holds while this node has it
// loaded, the publishes that wait until the holder released it (Redis.block).
// A room's publishes leave in the order they came. Its lock may be held
// while publisher.mu is taken (release), never the other way round.
type blockSet struct {
	mu    sync.Mutex
	rooms map[string][]Publication
	n     atomic.Int64 // len(rooms), read without the lock
}

func newBlockSet() blockSet { return blockSet{rooms: make(map[string][]Publication)} }

// block makes the room blocked, with p (when not nil) waiting first after
// any already there; it reports whether the room was blocked already.
func (s *blockSet) block(room string, p *Publication) (already bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, already := s.rooms[room]
	if p != nil {
		q = append(q, *p)
	}
	s.rooms[room] = q
	s.n.Store(int64(len(s.rooms)))
	return already
}

// hold queues p behind the others of its room when the room is blocked,
// and reports whether it did.
func (s *blockSet) hold(p Publication) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.rooms[p.Room]
	if ok {
		s.rooms[p.Room] = append(q, p)
	}
	return ok
}

// divert takes out of batch the publishes of blocked rooms, queued behind
// the ones that wait there, and returns what is left (in batch's array).
func (s *blockSet) divert(batch []job) []job {
	if s.n.Load() == 0 {
		return batch
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := batch[:0]
	for _, j := range batch {
		if j.kind == jobPublish {
			if q, ok := s.rooms[j.p.Room]; ok {
				s.rooms[j.p.Room] = append(q, j.p)
				continue
			}
		}
		kept = append(kept, j)
	}
	return kept
}

// release unblocks the room and hands its waiting publishes to queue,
// under the lock: a publish that comes once the room is no longer blocked
// is queued after them.
func (s *blockSet) release(room string, queue func([]Publication)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.rooms[room]
	delete(s.rooms, room)
	s.n.Store(int64(len(s.rooms)))
	queue(q)
}

// takeAll unblocks every room and returns the publishes that waited.
func (s *blockSet) takeAll() []Publication {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []Publication
	for room, q := range s.rooms {
		all = append(all, q...)
		delete(s.rooms, room)
	}
	s.n.Store(0)
	return all
}
