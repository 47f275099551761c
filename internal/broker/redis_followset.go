package broker

import (
	"slices"
	"sync/atomic"
	"time"
)

// forward is a publish sent on to its room's owner, waiting for its seq.
type forward struct {
	p      Publication
	owner  string
	sent   time.Time
	tries  int    // sent this many times (to the room's holder of the moment)
	ticket uint64 // its place among the room's publishes out (ownState.sendOut)
}

// maxForwardTries is how often a publish is sent on before its sender is
// refused, when the owner answered that it does not order the room now
// (loading it, just taken over) or the room was dropped here meanwhile;
// retryWait apart.
const (
	maxForwardTries = 3
	retryWait       = 100 * time.Millisecond
)

// follows is this node's side of the owner protocol (redis_follow.go):
// the followers of each room it owns, the owner of each room it follows,
// the loads waiting for an owner's snapshot and the forwarded publishes
// waiting for their seq. It is part of ownState, under ownState.mu, which a
// room's lock may be held while taking (keep, Follow's add): the methods
// below take it, and nothing is taken under it.
type follows struct {
	followers map[string][]string       // room owned here → the nodes that follow it
	owners    map[string]string         // room followed here → its owner
	waiting   map[string]chan followRec // room loading from its owner → its answer
	pending   map[uint64]forward        // forwarded publishes by request id
	nextReq   uint64
	// out holds, per room, the tickets of this node's publishes on their
	// way to another node's order (sent on to the room's owner or holder,
	// retried, or handed back to be ordered here: orderHere), not yet
	// answered, in the order they were sent; outN is how many in all,
	// read without the lock, so that a node with none out orders its owned
	// rooms' messages without taking it.
	out        map[string][]uint64
	outN       atomic.Int64
	nextTicket uint64
	// answeredCh is closed at the next answer of a publish out, and made
	// anew only when orderHere waits for one (firstOut): the publishes
	// waiting for those before them look again at once, instead of at
	// their next try, and an answer nobody waits for makes no channel.
	answeredCh chan struct{}
	// parked holds, per room, the forwards its owner sent this node: the
	// owner is ceding the room here, and its handover record (O) comes
	// right behind them (redis_balance.go).
	parked map[string][]parkedForward
	// cededTo holds, per room this node is ceding, the node it cedes the
	// room to, until the handover's record (W) comes back: what that node
	// forwards here meanwhile it sent before it read its own record (O),
	// and is never parked here (no O will come to this node); declined,
	// it is ordered by that node (redis_balance.go).
	cededTo map[string]string
	// marks are the nodes found unheard whose leftovers wait for this
	// node's mark to come back (Redis.unheard), by the mark's number.
	marks    map[uint64]mark
	nextMark uint64
}

// mark is a node found unheard, and when.
type mark struct {
	node string
	at   time.Time
}

func newFollows() follows {
	return follows{followers: map[string][]string{}, owners: map[string]string{},
		waiting: map[string]chan followRec{}, pending: map[uint64]forward{}, out: map[string][]uint64{},
		marks: map[uint64]mark{}, parked: map[string][]parkedForward{}, cededTo: map[string]string{}}
}

// addFollower records that node follows room, owned here.
func (s *ownState) addFollower(room, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.followers[room] {
		if n == node {
			return
		}
	}
	s.followers[room] = append(s.followers[room], node)
}

func (s *ownState) removeFollower(room, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.followers[room]
	for i, n := range fs {
		if n == node {
			fs = append(fs[:i:i], fs[i+1:]...)
			break
		}
	}
	if len(fs) == 0 {
		delete(s.followers, room)
	} else {
		s.followers[room] = fs
	}
}

// followersOf returns the nodes following room; the slice is not to be
// changed.
func (s *ownState) followersOf(room string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.followers[room]
}

// takeFollowers returns and forgets the followers of room.
func (s *ownState) takeFollowers(room string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.followers[room]
	delete(s.followers, room)
	return fs
}

func (s *ownState) setFollowers(room string, nodes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(nodes) == 0 {
		delete(s.followers, room)
		return
	}
	s.followers[room] = nodes
}

// sharedCounts returns how many rooms this node owns that other nodes
// follow, and how many it follows.
func (s *ownState) sharedCounts() (owned, followed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.followers), len(s.owners)
}

// toCede picks n rooms owned here that others follow, each with the
// follower to cede it to (its first).
func (s *ownState) toCede(n int) map[string]string {
	if n <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rooms := make(map[string]string, n)
	for room, fs := range s.followers {
		if len(rooms) == n {
			break
		}
		rooms[room] = fs[0]
	}
	return rooms
}

func (s *ownState) ownerOf(room string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owners[room]
}

// setOwner records room's owner; "" forgets it. It ends a cede of the
// room here (cedeTo): the owner's record (W) of a cede comes after the
// forwards this node sent the new owner, and before any that owner sends
// once it holds the room (ceding it back here, for one).
func (s *ownState) setOwner(room, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cededTo, room)
	if owner == "" {
		delete(s.owners, room)
	} else {
		s.owners[room] = owner
	}
}

// followedFrom returns the rooms followed here whose owner is node.
func (s *ownState) followedFrom(node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rooms []string
	for r, o := range s.owners {
		if o == node {
			rooms = append(rooms, r)
		}
	}
	return rooms
}

// await returns the channel a load of room waits on for its owner's answer.
func (s *ownState) await(room string) chan followRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := make(chan followRec, 1)
	s.waiting[room] = w
	return w
}

func (s *ownState) stopAwaiting(room string, w chan followRec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting[room] == w {
		delete(s.waiting, room)
	}
}

// answer hands rec to the load of its room waiting for it, if any.
func (s *ownState) answer(rec followRec) {
	s.mu.Lock()
	w := s.waiting[rec.room]
	s.mu.Unlock()
	if w != nil {
		select {
		case w <- rec:
		default: // an answer to an earlier ask, still unread: this one is stale
		}
	}
}

// addPending records a forwarded publish and returns its request id.
func (s *ownState) addPending(fw forward) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextReq++
	s.pending[s.nextReq] = fw
	return s.nextReq
}

func (s *ownState) takePending(req uint64) (forward, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fw, ok := s.pending[req]
	delete(s.pending, req)
	return fw, ok
}

// takeExpired returns and forgets the forwarded publishes sent before
// deadline, or to owner when owner is not "".
func (s *ownState) takeExpired(deadline time.Time, owner string) []forward {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fws []forward
	for req, fw := range s.pending {
		if fw.sent.Before(deadline) || owner != "" && fw.owner == owner {
			fws = append(fws, fw)
			delete(s.pending, req)
		}
	}
	return fws
}

// sendOut records that a publish of room goes out to another node's order
// and returns its ticket, which answered takes back. Its publisher calls
// it before Publish returns, so that the sender's next message, which
// comes after, sees it (isOut).
func (s *ownState) sendOut(room string) (ticket uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextTicket++
	s.out[room] = append(s.out[room], s.nextTicket)
	s.outN.Add(1)
	return s.nextTicket
}

// answered records that the publish of room with ticket, sent out, was
// answered: ordered by another node or here (orderHere), or given up.
func (s *ownState) answered(room string, ticket uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.out[room]
	i := slices.Index(ts, ticket)
	if i < 0 {
		return
	}
	if ts = slices.Delete(ts, i, i+1); len(ts) == 0 {
		delete(s.out, room)
	} else {
		s.out[room] = ts
	}
	s.outN.Add(-1)
	if s.answeredCh != nil {
		close(s.answeredCh)
		s.answeredCh = nil
	}
}

// isOut reports whether a publish of room is on its way to another node's
// order: while one is, the room is not ordered here, or a later message of
// the same sender could overtake it (the room was handed to this node, or
// loaded here, while the earlier one was out).
func (s *ownState) isOut(room string) bool {
	if s.outN.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.out[room]) > 0
}

// firstOut reports whether ticket is the first of room's publishes out:
// the one orderHere may order now. When it is not, answered is closed
// once any publish out is answered after this look.
func (s *ownState) firstOut(room string, ticket uint64) (first bool, answered <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts := s.out[room]; len(ts) > 0 && ts[0] == ticket {
		return true, nil
	}
	if s.answeredCh == nil {
		s.answeredCh = make(chan struct{})
	}
	return false, s.answeredCh
}

// markUnheard records that node was found unheard at now, and returns the
// number of the mark this node sends itself (Redis.unheard).
func (s *ownState) markUnheard(node string, now time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMark++
	s.marks[s.nextMark] = mark{node: node, at: now}
	return s.nextMark
}

// takeMark takes the node of the mark req, back on this node's channel.
func (s *ownState) takeMark(req uint64) (node string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.marks[req]
	delete(s.marks, req)
	return m.node, ok
}

// takeMarksBefore takes the nodes of the marks made before deadline, whose
// marks did not come back.
func (s *ownState) takeMarksBefore(deadline time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var nodes []string
	for req, m := range s.marks {
		if m.at.Before(deadline) {
			nodes = append(nodes, m.node)
			delete(s.marks, req)
		}
	}
	return nodes
}
