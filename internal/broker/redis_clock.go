package broker

import "time"

// The ownership protocol's timing (redis_own.go, redis_follow.go) as
// decisions driven by explicit times: the loops that run it (leaseLoop,
// followRoom, forwardSweepLoop) read the clock and call these,
// and redis_clock_test.go gives them the times instead, with no Redis and
// no sleeps.

// leaseClock is this node's lease as leaseLoop keeps it: until when the
// node may order the rooms it holds, what a renewal must do before it
// counts, and when the peers' leases say anything.
type leaseClock struct {
	// until is when the node stops ordering: a nodeLease after its last
	// renewal was sent, less leaseMargin. Redis keeps the lease a
	// nodeLease after it got the renewal, later than it was sent, so the
	// node stops at least leaseMargin before: slack for a look at the
	// lease made just before it ends and acted on after, and for clocks
	// that run at different rates. Zero before the first renewal.
	until time.Time
	// back is when renewals came back after failing (Redis unreachable, a
	// failover) or after the lease lapsed: until a lease later, a peer's
	// lease gone is no sign of its death, since it could not renew it
	// either.
	back   time.Time
	failed bool // a renewal failed since the last that counted
}

// renewal is a renewal of the node's lease sent at sent, and what it must
// do before it counts.
type renewal struct {
	sent time.Time
	// verify: the lease lapsed (or none was given yet), so rooms held may
	// have been taken over: they are checked first (verifyHeld), and once
	// the renewal counts the joiners that waited on the lapsed lease go on.
	verify bool
	// rejoin: a lease given lapsed, so the peers may have taken this node
	// out of its rooms' sets of nodes (checkPeers): it joins them again.
	rejoin bool
}

// renew begins a renewal sent at sent.
func (l *leaseClock) renew(sent time.Time) renewal {
	lapsed := sent.After(l.until)
	return renewal{sent: sent, verify: lapsed, rejoin: lapsed && !l.until.IsZero()}
}

// fail records a renewal that Redis did not answer.
func (l *leaseClock) fail() { l.failed = true }

// renewed records that r went through, its checks with it: it returns the
// node's lease and whether the peers' leases may be checked now (a lease
// after renewals came back).
func (l *leaseClock) renewed(r renewal) (until time.Time, checkPeers bool) {
	l.until = r.sent.Add(nodeLease - leaseMargin)
	if l.failed || r.verify {
		l.back, l.failed = r.sent, false
	}
	return l.until, r.sent.Sub(l.back) >= nodeLease
}

// ordersAt reports whether the node may order its rooms at now: fencing,
// as leaseState.lapsedAt reads it (Redis.publishOwned, onFollowAsk, JoinsWait).
func (l *leaseClock) ordersAt(now time.Time) bool { return now.Before(l.until) }

// cutOffLease is how long a node cut off from Redis goes on ordering the
// rooms it owns: as long as it is cut off (leaseLoop gives it a lease anew
// once Redis answers). Nodes that find its lease gone meanwhile take its
// rooms over under a new epoch: the two streams are told apart by the
// epoch, and the old owner's writes refused by the holder key
// (persist.lua), not by the lease; once back, it drops the rooms it lost
// (verifyHeld).
const cutOffLease = 100 * 365 * 24 * time.Hour

// cutOff returns the lease of a node found cut off from Redis at now, and
// whether it keeps one: not when its lease had lapsed already (it was
// stopped, and a command failed on waking), for rooms it held may be
// another node's by now, and their joiners wait for the check.
func (l *leaseState) cutOff(now time.Time) (until time.Time, ok bool) {
	if l.lapsedAt(now) {
		return time.Time{}, false
	}
	return now.Add(cutOffLease), true
}

// ownerAsk is a node's wait on a room's owner, asked at at to follow the
// room (F: followRoom): the owner has wait to answer before the node reads
// the room's holder.
type ownerAsk struct {
	self  string // this node
	owner string // the node asked
	at    time.Time
	wait  time.Duration
}

// checkAt is when the node stops waiting and reads the room's holder.
func (a ownerAsk) checkAt() time.Time { return a.at.Add(a.wait) }

// due reports whether the owner had its time to answer at now.
func (a ownerAsk) due(now time.Time) bool { return !now.Before(a.checkAt()) }

// holderStep is what a node whose owner did not answer in time does on
// reading the room's holder.
type holderStep int

const (
	holderFree   holderStep = iota // nobody holds the room, or this node does: load it
	holderMoved                    // another node holds it now: ask that one
	holderSilent                   // the node asked still holds it: see takeOver
)

// onHolder says what to do when the room's holder is holder.
func (a ownerAsk) onHolder(holder string) holderStep {
	switch holder {
	case "", a.self:
		return holderFree
	case a.owner:
		return holderSilent
	}
	return holderMoved
}

// takeOver reports whether a holder that did not answer in time is taken
// over: its lease is gone (Redis let it expire a nodeLease after its last
// renewal, when the holder had stopped ordering for leaseMargin already),
// or it listens to nothing (it died and Redis dropped its subscription, or
// it lost Redis: either way it answers no one).
func takeOver(leaseAlive, listens bool) bool { return !leaseAlive || !listens }

// forwardDeadline is the send time before which a forwarded publish not
// answered at now is refused: its owner was stopped or cut off.
func forwardDeadline(now time.Time) time.Time { return now.Add(-forwardTimeout) }
