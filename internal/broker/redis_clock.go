package broker

import "time"

// The ownership protocol's timing (redis_own.go, redis_follow.go) as
// decisions driven by explicit times: the loops that run it (leaseLoop)
// read the clock and call these,
// and redis_clock_test.go gives them the times instead, with no Redis and
// no sleeps.

// leaseClock is this node's lease as leaseLoop keeps it: until when the
// node may order the rooms it holds, what a renewal must do before it
// counts, and when the peers' leases say anything.
type leaseClock struct {
	// until is when the node stops ordering: a nodeLease after its last
	// renewal was sent, less leaseMargin for the time the renewal took to
	// reach Redis (Redis keeps the lease a nodeLease after it got it).
	// Zero before the first renewal.
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
// as leaseState.lapsedAt and the rooms (room.Hub's leased) read it.
func (l *leaseClock) ordersAt(now time.Time) bool { return now.Before(l.until) }
