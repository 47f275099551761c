package broker

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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
	granted sync.Map     // room → *grant: the rooms this node holds, not given up
	held    atomic.Int64 // how many granted holds, for Stats
	follows              // the owner protocol's followers, owners and forwards
}

// grant is this node's holding of one room. Whoever orders under it (a
// publish, a follower's snapshot) enters it first and leaves it after; a
// node that cedes the room (redis_balance.go) revokes it and waits until
// nobody is inside, so that nothing it did not see is ordered after the
// seq it hands on: the check of the holding and the room's order are two
// steps, a lock-free look-up and the room's lock, and a publish between
// them would otherwise order a seq the next owner hands out too.
type grant struct {
	from    atomic.Uint64 // the seq the room's order here starts after
	inside  atomic.Int32  // publishes and snapshots ordering under it now
	revoked atomic.Bool   // ceded: nobody enters any more
}

func newOwnState() ownState {
	return ownState{follows: newFollows()}
}

// grant records that this node holds the room, whose seqs up to from were
// handed out before: the room orders here once its seq reached from. A
// room granted again keeps the larger from; a revoked grant (a cede on its
// way) is replaced.
func (s *ownState) grant(room string, from uint64) {
	g := &grant{}
	g.from.Store(from)
	for {
		old, loaded := s.granted.LoadOrStore(room, g)
		if !loaded {
			s.held.Add(1)
			return
		}
		og := old.(*grant)
		if og.revoked.Load() {
			if s.granted.CompareAndSwap(room, og, g) {
				return
			}
			continue
		}
		og.raise(from)
		return
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
	g, ok := s.granted.Load(room)
	if !ok {
		return 0, false
	}
	return g.(*grant).from.Load(), true
}

// enter returns the room's grant, entered (the caller leaves it when its
// order is done), and the seq its order starts after; false when the room
// is not held here or is being ceded.
func (s *ownState) enter(room string) (*grant, uint64, bool) {
	v, ok := s.granted.Load(room)
	if !ok {
		return nil, 0, false
	}
	g := v.(*grant)
	g.inside.Add(1)
	// After the count: a cede that revoked before it waits for us, one
	// that revokes after it is seen here (sequentially consistent atomics).
	if g.revoked.Load() {
		g.inside.Add(-1)
		return nil, 0, false
	}
	return g, g.from.Load(), true
}

// raise makes from the grant's start, unless it starts later already.
func (g *grant) raise(from uint64) {
	for {
		cur := g.from.Load()
		if cur >= from || g.from.CompareAndSwap(cur, from) {
			return
		}
	}
}

// leave ends what enter began.
func (g *grant) leave() { g.inside.Add(-1) }

// revoke stops new entries into the room's grant and waits until those
// inside left; it reports false when the room is not held here or is being
// ceded already. The room stays granted (holds, JoinsWait) until the
// caller gives it up.
func (s *ownState) revoke(room string) bool {
	v, ok := s.granted.Load(room)
	if !ok || !v.(*grant).revoked.CompareAndSwap(false, true) {
		return false
	}
	g := v.(*grant)
	// Those inside hold a room's lock for one message's order, or wait for
	// it: a few yields mostly, then naps, so that a node short of CPU does
	// not spend it here (a busy spin starved a node's lease renewal on the
	// VM past its knee).
	for i, nap := 0, 10*time.Microsecond; g.inside.Load() > 0; i++ {
		if i < 16 {
			runtime.Gosched()
			continue
		}
		time.Sleep(nap)
		nap = min(2*nap, time.Millisecond)
	}
	return true
}

// unrevoke lets the room be ordered again after a cede that did not happen
// (the room was no longer loaded).
func (s *ownState) unrevoke(room string) {
	if v, ok := s.granted.Load(room); ok {
		v.(*grant).revoked.Store(false)
	}
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
