package broker

import (
	"testing"
	"time"
)

// The ownership protocol's decisions (redis_clock.go) on a fake clock:
// explicit times, no Redis, no sleeps. The same protocol runs against a
// real redis-server in TestRedisOwnedRoom, TestRedisOwnerStoppedHandsItsRoomsOver,
// TestRedisRoomOfASilentOwnerTakenOverWithNewEpoch,
// TestRedisOwnerThatLostItsRoomDropsIt, TestRedisRejoinAfterALapsedLease,
// TestRedisOwnerOrdersWhatItsFollowersSend and
// TestRedisOutagePastTheLeaseKeepsFollowedRooms.

// clockT0 is the fake clock's origin; at(d) is d after it.
var clockT0 = time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return clockT0.Add(d) }

// renewStep is one renewal of a node's lease in a leaseClock table: sent at
// at, answered by Redis or not, and what the clock must say of it.
type renewStep struct {
	at             time.Duration
	fails          bool
	verify, rejoin bool // what the renewal must do first
	peers          bool // whether it checks the peers' leases (when it counts)
}

// TestLeaseClock: the node's lease over renewals that go through, fail,
// or come late (the node was stopped).
func TestLeaseClock(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name  string
		steps []renewStep
	}{
		{"grant: the first renewal checks the (no) rooms held, and not the peers", []renewStep{
			{at: 0, verify: true},
		}},
		{"renewed every third of a lease: peers checked a lease after the first", []renewStep{
			{at: 0, verify: true}, {at: s}, {at: 2 * s}, {at: 3 * s, peers: true}, {at: 4 * s, peers: true},
		}},
		{"a renewal past the lease (stopped) verifies and rejoins, peers a lease later", []renewStep{
			{at: 0, verify: true}, {at: s}, {at: 5 * s, verify: true, rejoin: true},
			{at: 6 * s}, {at: 7 * s}, {at: 8 * s, peers: true},
		}},
		{"the lease's last instant is still the lease", []renewStep{
			{at: 0, verify: true}, {at: nodeLease - leaseMargin},
			{at: 2*(nodeLease-leaseMargin) + 1, verify: true, rejoin: true},
		}},
		{"failed within the lease: no verify, peers a lease after it came back", []renewStep{
			{at: 0, verify: true}, {at: s}, {at: 2 * s, fails: true}, {at: 3 * s},
			{at: 4 * s}, {at: 5 * s}, {at: 6 * s, peers: true},
		}},
		{"failed past the lease: verify and rejoin first", []renewStep{
			{at: 0, verify: true}, {at: s, fails: true}, {at: 2 * s, fails: true},
			{at: 3 * s, fails: true, verify: true, rejoin: true},
			{at: 4 * s, verify: true, rejoin: true}, {at: 5 * s}, {at: 6 * s}, {at: 7 * s, peers: true},
		}},
		{"failed before any lease: verify, nothing to rejoin", []renewStep{
			{at: 0, fails: true, verify: true}, {at: s, verify: true}, {at: 2 * s}, {at: 3 * s}, {at: 4 * s, peers: true},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var lc leaseClock
			for _, st := range c.steps {
				r := lc.renew(at(st.at))
				if r.verify != st.verify || r.rejoin != st.rejoin {
					t.Fatalf("at %v: verify %v rejoin %v, want %v and %v", st.at, r.verify, r.rejoin, st.verify, st.rejoin)
				}
				if st.fails {
					lc.fail()
					continue
				}
				until, peers := lc.renewed(r)
				if want := at(st.at + nodeLease - leaseMargin); !until.Equal(want) {
					t.Fatalf("at %v: lease until %v, want %v", st.at, until, want)
				}
				if peers != st.peers {
					t.Fatalf("at %v: peers checked %v, want %v", st.at, peers, st.peers)
				}
			}
		})
	}
}

// TestLeaseFencing: a node orders only within its lease, and stops at
// least leaseMargin before Redis lets the lease go, however long its
// renewal took to get there (within the renewal's timeout): a takeover,
// which waits for the lease to be gone in Redis, never finds the old owner
// still ordering. leaseState (what the rooms and the receiving side read)
// says the same. The room refusing to order while lapsed is pinned by
// room's TestPublishOwned ("lease lapsed"); the old owner's writes after a
// takeover refused by Redis (persist.lua, the holder key) by
// TestRedisOwnerThatLostItsRoomDropsIt and
// TestRedisPersistCallReportsATakenRoomAlone.
func TestLeaseFencing(t *testing.T) {
	for _, took := range []time.Duration{0, 300 * time.Millisecond, leaseMargin} {
		var lc leaseClock
		sent := at(10 * time.Second)
		if lc.ordersAt(sent) {
			t.Fatal("orders before any lease")
		}
		until, _ := lc.renewed(lc.renew(sent))
		var ls leaseState
		ls.until.Store(until.UnixNano())
		gone := sent.Add(took + nodeLease) // Redis's lease expires
		stop := gone.Add(-leaseMargin)     // the latest the node may stop
		for _, c := range []struct {
			now    time.Time
			orders bool
		}{
			{sent, true},
			{until.Add(-time.Nanosecond), true},
			{until, false},
			{stop, false},
			{gone, false},
		} {
			if got := lc.ordersAt(c.now); got != c.orders {
				t.Errorf("renewal took %v: orders at %v: %v, want %v", took, c.now.Sub(sent), got, c.orders)
			}
			if got := ls.lapsedAt(c.now); got == c.orders {
				t.Errorf("renewal took %v: leaseState lapsed at %v: %v, want %v", took, c.now.Sub(sent), got, !c.orders)
			}
		}
		if until.After(stop) {
			t.Errorf("renewal took %v: the node orders until %v after sending, past %v, leaseMargin before Redis's lease ends",
				took, until.Sub(sent), stop.Sub(sent))
		}
	}
}
