package broker

import (
	"sync"
	"sync/atomic"
)

// ownState is this node's state of room ownership (redis_own.go): the
// rooms this node holds, and the followers and owners of rooms (follows,
// redis_followset.go). No step changes both together, nor holds the lock
// long: one lock serves both. It is taken under a room's lock (keep,
// Follow's add), healthState.localMu (publishDown) and fillMu; nothing is
// taken under it.
//
// The rooms held are read by every publish (Redis.publishOwned) and by the
// rooms' joins (JoinsWait), under a room's lock: a sync.Map, read without
// a lock, written at a grant or a release (a room's load, not its
// messages).
type ownState struct {
	mu      sync.Mutex
	granted sync.Map     // room → uint64: the rooms this node holds, not given up, each with the seq its order here starts after
	held    atomic.Int64 // how many granted holds, for Stats
	follows              // the owner protocol's followers, owners and forwards
}

func newOwnState() ownState {
	return ownState{follows: newFollows()}
}

// grant records that this node holds the room, whose seqs up to from were
// handed out before: the room orders here once its seq reached from. A
// room granted again keeps the larger from.
func (s *ownState) grant(room string, from uint64) {
	for {
		old, loaded := s.granted.LoadOrStore(room, from)
		if !loaded {
			s.held.Add(1)
			return
		}
		if old.(uint64) >= from || s.granted.CompareAndSwap(room, old, from) {
			return
		}
	}
}

// holds reports whether the room is held here.
func (s *ownState) holds(room string) bool {
	_, ok := s.granted.Load(room)
	return ok
}

// heldFrom returns the seq after which the room, held here, orders its
// messages here; false when it is not held.
func (s *ownState) heldFrom(room string) (uint64, bool) {
	from, ok := s.granted.Load(room)
	if !ok {
		return 0, false
	}
	return from.(uint64), true
}

// giveUp forgets the room's holding and reports whether it was held here.
func (s *ownState) giveUp(room string) bool {
	_, held := s.granted.LoadAndDelete(room)
	if held {
		s.held.Add(-1)
	}
	return held
}

// heldRooms returns the rooms held here.
func (s *ownState) heldRooms() []string {
	var rooms []string
	s.granted.Range(func(r, _ any) bool {
		rooms = append(rooms, r.(string))
		return true
	})
	return rooms
}

// heldCount returns the number of rooms held here.
func (s *ownState) heldCount() int { return int(s.held.Load()) }
