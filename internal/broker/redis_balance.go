package broker

import (
	"context"
	"slices"
	"time"
)

// Ownership follows the members: the first node to load a room owns it, so
// where members of many rooms arrive on two nodes at once (a load balancer
// spreading clients, a node restarted and its clients back on the other),
// one node may own nearly all of them: the VM's two-node knee runs found
// one node holding 982–998 of 1,000 rooms shared with the other, which then
// ordered, and past its capacity refused, the messages of both. A node
// that owns more rooms shared with other nodes than it follows cedes some
// to one of their followers, some every Config.Balance, never while past its
// capacity (balance): the follower takes the room over with no gap in its
// stream (handover.lua, as when an owner frees a room), and this node
// follows it from then on, its members staying. With two nodes both end
// owning half of the rooms they share; with more, a node gives away until
// it owns no more shared rooms than it follows (a room on three nodes has
// two followers to one owner, so a node that owns all of them stops at
// half).

const (
	// maxCedes bounds the rooms ceded a Config.Balance: each is a script
	// call, flushes the writes held, and the publishes on their way to
	// this node as it cedes are sent again to the new owner. Ceded while
	// clients join, before their traffic, a thousand rooms a second cost
	// nothing seen; 64 a second left most of a 1,000-room imbalance to
	// the traffic, and two nodes past the VM's knee fell behind.
	maxCedes = 256
	// balanceSlack is how many more shared rooms than it follows a node
	// owns before it cedes any (also a tenth of all its shared rooms):
	// a few rooms either way are not worth a handover.
	balanceSlack = 8
)

// balanceLoop cedes rooms while this node owns too many of the rooms it
// shares with other nodes (cedeCount).
func (b *Redis) balanceLoop(ctx context.Context) {
	if b.cfg.Balance <= 0 {
		return
	}
	t := time.NewTicker(b.cfg.Balance)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.balance()
	}
}

// balance cedes the rooms cedeCount says, while Redis is reachable, the
// lease alive (a node that may have lost its rooms hands on nothing) and
// the node within its capacity: a cede sends the publishes on their way
// to it again, and its handover flushes the writes held, work that a node
// past its capacity has no room for.
func (b *Redis) balance() {
	if !b.health.up.Load() || b.lease.lapsed() || b.health.recovering.Load() || b.overloaded() || b.behind() {
		return
	}
	owned, followed := b.own.sharedCounts()
	n := cedeCount(owned, followed)
	if n == 0 {
		return
	}
	b.log.Debug("ceding rooms shared with other nodes", "owned", owned, "followed", followed, "cede", n)
	for room, to := range b.own.toCede(n) {
		b.cede(room, to)
	}
}

// cedeCount is how many of the owned shared rooms a node cedes: half the
// difference (each cede moves one room from one side to the other), at
// most maxCedes, none within the slack.
func cedeCount(owned, followed int) int {
	over := owned - followed
	if over <= max(balanceSlack, (owned+followed)/10) {
		return 0
	}
	return min(over/2, maxCedes)
}

// cede hands the room, held here, to the follower to, and follows it from
// then on. The room's owner becomes to here first, so that a publish of
// this node's members that finds the holding revoked goes to to, in the
// order sent, ahead of the handover record (to parks it until the record
// comes: parkForward). Then the holding is revoked and the last seq read
// under the room's lock once everyone ordering under it left, so that
// nothing is ordered here after that seq: the new owner's order starts
// there. Its followers (this node among them) learn of it from
// handover.lua, after every message this node sent them.
func (b *Redis) cede(room, to string) {
	if b.own.ownerOf(room) != "" {
		return
	}
	b.own.cedeTo(room, to)
	if !b.own.revoke(room) {
		b.own.clearOwner(room, to)
		return
	}
	var seq uint64
	var others []string
	ceded := false
	b.h.Follow(room, 0, func(_ string, last uint64, _ []Entry) {
		// A follower that left meanwhile may still be named here (its U
		// not read yet): handed a room it does not have, it hands it on
		// (owns), and what it parked is answered 0 and sent again.
		if !slices.Contains(b.own.followersOf(room), to) || !b.own.giveUp(room) {
			return
		}
		ceded, seq = true, last
		for _, n := range b.own.takeFollowers(room) {
			if n != to {
				others = append(others, n)
			}
		}
	})
	if !ceded {
		// Not ceded: the room freed meanwhile (Unsubscribe releases it),
		// or its follower gone. What this node's members sent to `to`
		// meanwhile, `to` parked, and declines (0) after a while
		// (expireParked): it is ordered here again.
		b.own.clearOwner(room, to)
		b.own.unrevoke(room)
		return
	}
	b.count.ceded.Add(1)
	b.handOff(room, seq, append(append([]string{to}, others...), b.id))
}

// parkedForward is a forward from the owner of a room this node follows:
// the owner is ceding the room to this node.
type parkedForward struct {
	rec followRec
	at  time.Time
}

// parkForward keeps r, a publish the owner of its room forwarded here,
// until the owner's handover record makes this node the owner
// (unparkForwards), and reports whether it did: the owner forwards to this
// node only while ceding the room to it. Ordered at once, it would be
// declined (this node does not order the room yet) and sent again later,
// behind the sender's next messages.
func (b *Redis) parkForward(r followRec) bool {
	return b.own.park(r, time.Now())
}

// unparkForwards orders what was parked for room, in the order it came,
// once this node owns it.
func (b *Redis) unparkForwards(room string) {
	for _, p := range b.own.takeParked(room) {
		b.onForward(p.rec)
	}
}

// expireParked declines (0) what was parked longer than forwardTimeout/2:
// the cede did not happen, and its senders try the holder again.
func (b *Redis) expireParked(now time.Time) {
	for _, p := range b.own.takeParkedBefore(now.Add(-forwardTimeout / 2)) {
		b.sendTo(p.rec.node, encAck(p.rec.req, 0))
	}
}

// cedeTo makes to the owner of room here, and remembers that this node
// cedes the room to it (park).
func (s *ownState) cedeTo(room, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owners[room] = to
	s.cededTo[room] = to
}

// clearOwner forgets room's owner if it is still owner.
func (s *ownState) clearOwner(room, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners[room] == owner {
		delete(s.owners, room)
		delete(s.cededTo, room)
	}
}

// park keeps r when its sender is the owner of its room here, and this
// node did not cede the room to it: the node a room is ceded to forwards
// to the ceding node only what it sent before it read the handover record,
// which it orders itself once it does (declined here at once: 0). A room
// held here is never parked (checked without the lock: every forward an
// owner is sent comes here).
func (s *ownState) park(r followRec, now time.Time) bool {
	if s.holds(r.room) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners[r.room] != r.node || s.cededTo[r.room] == r.node {
		return false
	}
	s.parked[r.room] = append(s.parked[r.room], parkedForward{rec: r, at: now})
	return true
}

// takeParked returns and forgets what was parked for room.
func (s *ownState) takeParked(room string) []parkedForward {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.parked[room]
	delete(s.parked, room)
	return ps
}

// takeParkedBefore returns and forgets every room's parked forwards when
// the first of them was parked before deadline.
func (s *ownState) takeParkedBefore(deadline time.Time) []parkedForward {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []parkedForward
	for room, ps := range s.parked {
		if ps[0].at.Before(deadline) {
			old = append(old, ps...)
			delete(s.parked, room)
		}
	}
	return old
}
