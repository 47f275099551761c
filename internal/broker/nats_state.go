package broker

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// natsRole is what this node is to a room it subscribed to.
type natsRole uint8

const (
	natsLoading   natsRole = iota // its holder not known yet, or its snapshot not here yet
	natsOwned                     // this node holds it and orders its messages
	natsFollowing                 // another node holds it; this one gets its messages
)

// natsRoomState is a room subscribed on this node, as the NATS broker sees it.
type natsRoomState struct {
	gen   uint64 // this subscription's number: the work of an older one is dropped
	role  natsRole
	epoch string
	owner string // following (or loading from): the holder
	// seq is the latest seq delivered here (following), for gaps.
	seq uint64
	// resync: a gap was seen; the owner's messages wait for its snapshot.
	resync  bool
	from    uint64 // owned: the seq its order starts after
	roomSub *nats.Subscription
	ownSub  *nats.Subscription // owned: the room's owner subject
	pending int                // forwards of the room on their way
	waiting []Publication      // published while the room loaded, in order
	// draining: the waiting publishes are being ordered; new ones queue.
	draining bool
	// waitingSince is when the oldest waiting publish came; asked when
	// the owner was last asked for its snapshot, stuck since when the
	// room waits for it (zero: it does not).
	waitingSince, asked, stuck time.Time
}

// direct reports whether a publish into the room may be ordered here at
// once: held here, and nothing of the room ahead of it (on its way to a
// former owner, or waiting for the room to load).
func (rs *natsRoomState) direct() bool {
	return rs.role == natsOwned && rs.pending == 0 && len(rs.waiting) == 0 && !rs.draining
}

// natsForward is a publish on its way to its room's owner on another node.
type natsForward struct {
	id    uint64
	p     Publication
	sent  time.Time
	owner string
	gen   uint64 // the room's subscription it was sent from
}

// natsState is the rooms this node subscribed to and the forwards it sent:
// what the receive, owner and room goroutines and the rooms' calls share.
// Its lock is taken under a room's (Room.mu) by keep's callers, never the
// other way: nothing calls the Handler while holding it.
type natsState struct {
	mu      sync.Mutex
	rooms   map[string]*natsRoomState
	fwd     map[uint64]*natsForward
	nextID  uint64
	nextGen uint64
	// releasing: rooms this node is releasing; a new load of one waits
	// for its release, lest it read the record the release changes.
	releasing map[string]chan struct{}
}

func (s *natsState) init() {
	s.rooms = make(map[string]*natsRoomState)
	s.fwd = make(map[uint64]*natsForward)
	s.releasing = make(map[string]chan struct{})
}

// owned reports whether this node holds room now.
func (s *natsState) owned(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rooms[room]
	return rs != nil && rs.role == natsOwned
}

// current returns room's state if its subscription is still gen's.
// Called with s.mu held.
func (s *natsState) current(room string, gen uint64) *natsRoomState {
	rs := s.rooms[room]
	if rs == nil || rs.gen != gen {
		return nil
	}
	return rs
}

// add makes room's state for a new subscription, whose room subject
// subscription is sub, and returns it with the release of the room this
// node is making, if any (the load waits for it).
func (s *natsState) add(room string, sub *nats.Subscription) (gen uint64, released chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextGen++
	s.rooms[room] = &natsRoomState{gen: s.nextGen, roomSub: sub}
	return s.nextGen, s.releasing[room]
}

// remove ends room's subscription and returns its state; for a room held
// here, done is closed (by released) once its release is done.
func (s *natsState) remove(room string) (rs *natsRoomState, done chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs = s.rooms[room]
	if rs == nil {
		return nil, nil
	}
	delete(s.rooms, room)
	if rs.role == natsOwned {
		done = make(chan struct{})
		s.releasing[room] = done
	}
	return rs, done
}

// released ends room's release here.
func (s *natsState) released(room string, done chan struct{}) {
	s.mu.Lock()
	delete(s.releasing, room)
	s.mu.Unlock()
	close(done)
}

// isLoading reports whether room's subscription gen still loads: its
// holder not found yet, or its snapshot not here yet.
func (s *natsState) isLoading(room string, gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.current(room, gen)
	return rs != nil && rs.role == natsLoading
}

// own makes room, gen's, held here from seq in epoch, its owner subject's
// subscription sub; false when the subscription ended meanwhile.
func (s *natsState) own(room string, gen uint64, epoch string, seq uint64, sub *nats.Subscription) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.current(room, gen)
	if rs == nil {
		return false
	}
	rs.role, rs.epoch, rs.from, rs.seq, rs.resync, rs.ownSub = natsOwned, epoch, seq, seq, false, sub
	return true
}

// nextWaiting takes the first publish that waited in a room held here,
// marking the room draining; false (and the room no longer draining) when
// none is left.
func (s *natsState) nextWaiting(room string, gen uint64) (p Publication, from uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.current(room, gen)
	if rs == nil {
		return Publication{}, 0, false
	}
	if len(rs.waiting) == 0 || rs.role != natsOwned {
		rs.draining, rs.waiting = false, nil
		return Publication{}, 0, false
	}
	p = rs.waiting[0]
	rs.waiting = rs.waiting[1:]
	rs.draining = true
	return p, rs.from, true
}

// setOwner names holder the owner a loading room asks for its snapshot.
func (s *natsState) setOwner(room string, gen uint64, holder string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.current(room, gen)
	if rs != nil {
		rs.owner = holder
	}
	return rs != nil
}

// takenOver reports whether a takeover into epoch ends room's stream here
// (not loading, and not in that epoch already).
func (s *natsState) takenOver(room, epoch string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rooms[room]
	return rs != nil && rs.role != natsLoading && rs.epoch != epoch
}

// natsRoute is where a publish goes.
type natsRoute uint8

const (
	natsDirect    natsRoute = iota // ordered here, from the seq given
	natsForwarded                  // sent to the owner (the forward returned)
	natsWaits                      // queued until the room loads or its owner is known again
	natsGone                       // the room is not subscribed here
)

// route decides where p goes: ordered here, forwarded (registered; the
// caller sends it) or queued.
func (s *natsState) route(p Publication) (natsRoute, uint64, *natsForward) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rooms[p.Room]
	switch {
	case rs == nil:
		return natsGone, 0, nil
	case rs.direct():
		return natsDirect, rs.from, nil
	case rs.role == natsFollowing && !rs.resync && len(rs.waiting) == 0:
		return natsForwarded, 0, s.forwardLocked(rs, p)
	}
	if len(rs.waiting) == 0 {
		rs.waitingSince = time.Now()
	}
	rs.waiting = append(rs.waiting, p)
	return natsWaits, 0, nil
}

// natsStuckWait is how long a room may wait for its owner's snapshot,
// asked again every natsAskAgain, before it is dropped (its members
// resume into it loaded anew).
const (
	natsAskAgain  = time.Second
	natsStuckWait = 8 * time.Second
)

// sweep finds what waited too long at now: rooms whose snapshot did not
// come (ask again, or drop past natsStuckWait) and publishes that waited
// past wait for their room (given up: taken out here).
func (s *natsState) sweep(now time.Time, wait time.Duration) (ask, drop []string, late []Publication) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for room, rs := range s.rooms {
		if len(rs.waiting) > 0 && !rs.draining && now.Sub(rs.waitingSince) > wait {
			late = append(late, rs.waiting...)
			rs.waiting = nil
		}
		if !rs.waitsForSnapshot() {
			rs.stuck = time.Time{}
			continue
		}
		switch {
		case rs.stuck.IsZero():
			rs.stuck, rs.asked = now, now
		case now.Sub(rs.stuck) > natsStuckWait:
			drop = append(drop, room)
			rs.stuck = time.Time{}
		case now.Sub(rs.asked) > natsAskAgain:
			ask = append(ask, room)
			rs.asked = now
		}
	}
	return ask, drop, late
}

// waitsForSnapshot: the room asked its owner for a snapshot (to load, or
// after a gap) and has not had it.
func (rs *natsRoomState) waitsForSnapshot() bool {
	return rs.owner != "" && (rs.role == natsLoading || rs.role == natsFollowing && rs.resync)
}

// forwardLocked registers p as a forward to rs's owner. Called with s.mu
// held.
func (s *natsState) forwardLocked(rs *natsRoomState, p Publication) *natsForward {
	s.nextID++
	fw := &natsForward{id: s.nextID, p: p, sent: time.Now(), owner: rs.owner, gen: rs.gen}
	s.fwd[fw.id] = fw
	rs.pending++
	return fw
}

// ownedFrom returns the seq a room held here orders from; direct: nothing
// of it is on its way elsewhere or waiting (a forward may be ordered).
func (s *natsState) ownedFrom(room string, direct bool) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rooms[room]
	if rs == nil || rs.role != natsOwned || direct && !rs.direct() {
		return 0, false
	}
	return rs.from, true
}

// takeForward removes forward id and reports whether what waited behind
// it in its room (held here by now) is to be ordered (drain).
func (s *natsState) takeForward(id uint64) (fw *natsForward, drain bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fw = s.fwd[id]
	if fw == nil {
		return nil, false
	}
	delete(s.fwd, id)
	return fw, s.answeredLocked(fw)
}

// lateForwards removes the forwards sent before now less wait.
func (s *natsState) lateForwards(now time.Time, wait time.Duration) (late []*natsForward, drain []*natsForward) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, fw := range s.fwd {
		if now.Sub(fw.sent) > wait {
			delete(s.fwd, id)
			if s.answeredLocked(fw) {
				drain = append(drain, fw)
			}
			late = append(late, fw)
		}
	}
	return late, drain
}

// answeredLocked counts fw off its room's forwards on their way, and
// reports whether the room, held here now (handed to this node while its
// forwards were on their way), has publishes waiting behind them.
func (s *natsState) answeredLocked(fw *natsForward) bool {
	rs := s.current(fw.p.Room, fw.gen)
	if rs == nil {
		return false
	}
	rs.pending--
	if rs.pending == 0 && rs.role == natsOwned && len(rs.waiting) > 0 && !rs.draining {
		rs.draining = true
		return true
	}
	return false
}

// follower returns what an owner that did not answer needs: the room's
// subscription, whether it is loading, and its owner; false for a room not
// here or held here.
func (s *natsState) follower(room string) (gen uint64, loading bool, owner string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rooms[room]
	if rs == nil || rs.role == natsOwned {
		return 0, false, "", false
	}
	return rs.gen, rs.role == natsLoading, rs.owner, true
}

// resyncAll makes every room followed here wait for its owner's snapshot,
// and returns them with the rooms that load from an owner.
func (s *natsState) resyncAll() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rooms []string
	for room, rs := range s.rooms {
		if rs.role == natsFollowing {
			rs.resync = true
		}
		if rs.role != natsOwned && rs.owner != "" {
			rooms = append(rooms, room)
		}
	}
	return rooms
}

// resyncing reports whether room, gen's, waits for its owner's snapshot.
func (s *natsState) resyncing(room string, gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.current(room, gen)
	return rs != nil && (rs.resync || rs.role == natsLoading)
}

// natsHeld is a room held here: its epoch and the seq its order starts after.
type natsHeld struct {
	room, epoch string
	from        uint64
}

// held returns the rooms held here.
func (s *natsState) held() []natsHeld { return s.heldRooms(false) }

// heldRooms returns the rooms held here, removing them from the state
// when remove is set.
func (s *natsState) heldRooms(remove bool) []natsHeld {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []natsHeld
	for room, rs := range s.rooms {
		if rs.role == natsOwned {
			out = append(out, natsHeld{room, rs.epoch, rs.from})
			if remove {
				delete(s.rooms, room)
			}
		}
	}
	return out
}

// accept takes message seq of room from sender: deliver it, or not (a
// duplicate, another owner's, a room not followed), or a gap (the room
// waits for the owner's snapshot from now).
func (s *natsState) accept(sender, room string, seq uint64) (deliver, gap bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rooms[room]
	if rs == nil || rs.role != natsFollowing || rs.owner != sender || rs.resync || seq <= rs.seq {
		return false, false
	}
	if seq > rs.seq+1 {
		rs.resync = true
		return false, true
	}
	rs.seq = seq
	return true, false
}

// natsSnapshotTo is what a snapshot does to a room here.
type natsSnapshotTo uint8

const (
	natsSnapshotStale  natsSnapshotTo = iota // not asked of sender: leave it
	natsSnapshotLoads                        // the room loads from it
	natsSnapshotFills                        // the room followed here catches up with missed
	natsSnapshotBroken                       // another stream, or what was missed is gone: drop the room
)

// snapshot applies an owner's snapshot to a room here. forwards are the
// publishes that waited, registered as forwards to send, in order.
func (s *natsState) snapshot(sender string, rec natsRecord) (to natsSnapshotTo, missed []Delivered, forwards []*natsForward) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rooms[rec.room]
	if rs == nil || rs.owner != sender || rs.role == natsOwned {
		return natsSnapshotStale, nil, nil
	}
	to = natsSnapshotFills
	if rs.role == natsLoading {
		rs.role, rs.epoch, rs.seq = natsFollowing, rec.epoch, rec.seq
		to = natsSnapshotLoads
	} else {
		if rec.epoch != rs.epoch {
			return natsSnapshotBroken, nil, nil
		}
		for _, e := range rec.tail {
			if e.Seq > rs.seq {
				missed = append(missed, Delivered{Room: rec.room, Seq: e.Seq, Payload: e.Payload})
			}
		}
		if rec.seq > rs.seq && (len(missed) == 0 || missed[0].Seq != rs.seq+1) {
			return natsSnapshotBroken, nil, nil
		}
		rs.seq, rs.resync = max(rs.seq, rec.seq), false
	}
	for _, p := range rs.waiting {
		forwards = append(forwards, s.forwardLocked(rs, p))
	}
	rs.waiting = nil
	return to, missed, forwards
}

// releasedBy marks a room followed from sender in epoch as released by it:
// its messages wait for the next owner. It returns the subscription and
// the latest seq here.
func (s *natsState) releasedBy(sender, room, epoch string) (gen, have uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rooms[room]
	if rs == nil || rs.role != natsFollowing || rs.owner != sender || rs.epoch != epoch {
		return 0, 0, false
	}
	rs.resync = true
	return rs.gen, rs.seq, true
}

// natsFollowed is a room this node follows (or loads from) another node.
type natsFollowed struct {
	room, owner string
	gen         uint64
	loading     bool
}

// followedFrom returns the rooms followed here, each with its owner.
func (s *natsState) followedFrom() []natsFollowed {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []natsFollowed
	for room, rs := range s.rooms {
		if rs.role != natsOwned && rs.owner != "" {
			out = append(out, natsFollowed{room: room, owner: rs.owner, gen: rs.gen, loading: rs.role == natsLoading})
		}
	}
	return out
}

// forwardsTo removes the forwards on their way to node, and returns those
// whose rooms, held here by now, have publishes to order behind them.
func (s *natsState) forwardsTo(node string) (fws, drain []*natsForward) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, fw := range s.fwd {
		if fw.owner == node {
			delete(s.fwd, id)
			fws = append(fws, fw)
			if s.answeredLocked(fw) {
				drain = append(drain, fw)
			}
		}
	}
	return fws, drain
}

// removeHeld removes the rooms held here from the node's state (it stops)
// and returns them.
func (s *natsState) removeHeld() []natsHeld { return s.heldRooms(true) }
