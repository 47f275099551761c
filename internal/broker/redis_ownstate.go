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
type ownState struct {
	mu      sync.Mutex
	granted map[string]bool // the rooms this node holds, not given up
	held    atomic.Int64    // len(granted), for Stats without the lock
	follows                 // the owner protocol's followers, owners and forwards
}

func newOwnState() ownState {
	return ownState{granted: make(map[string]bool), follows: newFollows()}
}

// grant records that this node holds the room.
func (s *ownState) grant(room string) {
	s.mu.Lock()
	s.granted[room] = true
	s.held.Store(int64(len(s.granted)))
	s.mu.Unlock()
}

// holds reports whether the room is held here.
func (s *ownState) holds(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted[room]
}

// giveUp forgets the room's holding and reports whether it was held here.
func (s *ownState) giveUp(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.granted[room]
	delete(s.granted, room)
	s.held.Store(int64(len(s.granted)))
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
func (s *ownState) heldCount() int { return int(s.held.Load()) }
