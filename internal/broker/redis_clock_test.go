package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
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
// renewal took to get there: a takeover, which waits for the lease to be
// gone in Redis, never finds the old owner still ordering. leaseState (what the rooms and the receiving side read)
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

// TestLeaseCutOff: a node cut off from Redis within its lease goes on
// ordering its rooms while it is cut off; one whose lease had lapsed (it
// was stopped, and failed a command on waking) orders nothing until it
// checked its rooms.
func TestLeaseCutOff(t *testing.T) {
	var ls leaseState
	ls.until.Store(at(2 * time.Second).UnixNano())
	until, ok := ls.cutOff(at(time.Second))
	if !ok || !until.Equal(at(time.Second+cutOffLease)) {
		t.Fatalf("cut off within the lease: %v until %v", ok, until.Sub(clockT0))
	}
	ls.until.Store(until.UnixNano())
	if ls.lapsedAt(at(24 * time.Hour)) {
		t.Error("cut off a day: the lease lapsed")
	}
	ls.until.Store(at(2 * time.Second).UnixNano())
	if _, ok := ls.cutOff(at(2 * time.Second)); ok {
		t.Error("cut off with the lease lapsed: it keeps a lease")
	}
}

// TestOwnerAsk: when a node that asked a room's owner to follow the room
// stops waiting, and what it does on reading the room's holder.
func TestOwnerAsk(t *testing.T) {
	wait := followWait
	if a := (ownerAsk{self: "me", owner: "a", at: at(0), wait: wait}); a.due(at(wait-time.Nanosecond)) || !a.due(at(wait)) || !a.checkAt().Equal(at(wait)) {
		t.Errorf("wait %v: due before %v, or not at it", wait, wait)
	}
	a := ownerAsk{self: "me", owner: "a"}
	for holder, want := range map[string]holderStep{
		"":   holderFree,   // released: load the room
		"me": holderFree,   // granted here meanwhile
		"a":  holderSilent, // the owner asked still holds it
		"b":  holderMoved,  // another node took it meanwhile: ask b
	} {
		if got := a.onHolder(holder); got != want {
			t.Errorf("holder %q: %v, want %v", holder, got, want)
		}
	}
	for _, c := range []struct{ alive, listens, want bool }{
		{true, true, false}, // a live owner that stalls: asked again
		{false, true, true}, // its lease is gone: it stopped ordering
		{true, false, true}, // it listens to nothing: dead, or cut off
		{false, false, true},
	} {
		if got := takeOver(c.alive, c.listens); got != c.want {
			t.Errorf("lease alive %v, listens %v: take over %v, want %v", c.alive, c.listens, got, c.want)
		}
	}
}

// fakeOwner is an owner node on the fake clock: its lease clock and the
// lease Redis keeps for it.
type fakeOwner struct {
	lc      leaseClock
	gone    time.Time // when Redis lets its lease go
	listens bool      // whether it still listens on its channel
}

// renewEvery renews the owner's lease every third of a lease from from to
// to (included), each renewal reaching Redis took after it was sent.
func (o *fakeOwner) renewEvery(from, to, took time.Duration) {
	for s := from; s <= to; s += nodeLease / 3 {
		o.lc.renewed(o.lc.renew(at(s)))
		o.gone = at(s + took + nodeLease)
	}
}

// TestTakeoverOnAFakeClock: a follower waiting on an owner that does not
// answer checks it every followWait, and takes the room over at the first
// check that finds its lease gone or nobody listening, never while the old
// owner still orders; the old owner, once it runs again, checks its rooms
// before it orders (and so finds the room lost).
func TestTakeoverOnAFakeClock(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name     string
		stalled  time.Duration // the owner's last renewal
		took     time.Duration // how long it took to reach Redis
		listens  bool
		askedAt  time.Duration
		wantTake time.Duration // when the follower takes the room over
	}{
		{"stalled owner: taken at the first check past its lease", 4 * s, 0, true, 5*s + 500*time.Millisecond, 7*s + 500*time.Millisecond},
		{"a slow last renewal keeps the lease longer", 4 * s, 600 * time.Millisecond, true, 5*s + 500*time.Millisecond, 8*s + 500*time.Millisecond},
		{"dead owner (nobody listens): taken at the first check", 4 * s, 0, false, 5*s + 500*time.Millisecond, 6*s + 500*time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			var o fakeOwner
			o.renewEvery(0, c.stalled, c.took)
			o.listens = c.listens
			a := ownerAsk{self: "b", owner: "a", at: at(c.askedAt), wait: followWait}
			var took time.Time
			for now := a.at; took.IsZero() && now.Before(at(time.Minute)); now = a.checkAt() {
				a.at = now // asked (again)
				if a.onHolder("a") != holderSilent {
					t.Fatal("the owner, still the holder, is not seen silent")
				}
				if now := a.checkAt(); takeOver(now.Before(o.gone), o.listens) {
					took = now
				}
			}
			if !took.Equal(at(c.wantTake)) {
				t.Fatalf("taken over at %v, want %v", took.Sub(clockT0), c.wantTake)
			}
			if o.listens && o.lc.ordersAt(took) {
				t.Fatalf("the old owner still orders at the takeover (%v), its lease until %v", took.Sub(clockT0), o.lc.until.Sub(clockT0))
			}
			// The old owner runs again: its first renewal checks its rooms
			// (and finds this one lost) before it orders anything.
			r := o.lc.renew(took.Add(time.Second))
			if !r.verify || o.lc.ordersAt(r.sent) {
				t.Fatalf("the old owner woken at %v: verify %v, orders %v", r.sent.Sub(clockT0), r.verify, o.lc.ordersAt(r.sent))
			}
		})
	}
}

// TestHandoverOnAFakeClock: an owner that frees a room hands it to its
// first follower with the room's last seq, so that the new owner orders
// from the next one, at once: it waits for no answer and no lease (its
// own lives); the other followers are told who owns the room now.
func TestHandoverOnAFakeClock(t *testing.T) {
	j := job{kind: jobHandover, room: "r", e: Entry{Seq: 41}, nodes: []string{"b", "c", "d"}}
	got := map[string]followRec{}
	handoverRecords(j, func(node string, rec []byte) {
		recs, err := splitFollow(string(rec), nil)
		if err != nil || len(recs) != 1 {
			t.Fatalf("record to %s: %v, %d records", node, err, len(recs))
		}
		got[node] = recs[0]
	})
	own := got["b"]
	if own.kind != recOwn || own.room != "r" || own.seq != 41 || !slices.Equal(own.nodes, []string{"c", "d"}) {
		t.Fatalf("the new owner got %+v, want O r 41 [c d]", own)
	}
	for _, n := range []string{"c", "d"} {
		if w := got[n]; w.kind != recOwner || w.room != "r" || w.node != "b" {
			t.Errorf("%s got %+v, want W r b", n, w)
		}
	}
	var b leaseClock
	b.renewed(b.renew(at(0)))
	if !b.ordersAt(at(time.Second)) {
		t.Error("the new owner, leased, does not order at once")
	}
}

// TestForwardRefusedOnAFakeClock: a publish forwarded to an owner that does
// not answer is refused forwardTimeout after it was sent, not before; those
// forwarded to an owner whose lease ended (ownerGone) at once.
func TestForwardRefusedOnAFakeClock(t *testing.T) {
	s := newOwnState()
	first := s.addPending(forward{p: Publication{Room: "r"}, owner: "a", sent: at(0), tries: 1})
	s.addPending(forward{p: Publication{Room: "r"}, owner: "a", sent: at(500 * time.Millisecond), tries: 1})
	s.addPending(forward{p: Publication{Room: "q"}, owner: "b", sent: at(900 * time.Millisecond), tries: 1})
	for _, c := range []struct {
		now  time.Duration
		want int
	}{
		{forwardTimeout, 0},
		{forwardTimeout + time.Nanosecond, 1},
		{forwardTimeout + 500*time.Millisecond, 0},
		{forwardTimeout + 500*time.Millisecond + 1, 1},
	} {
		if fws := s.takeExpired(forwardDeadline(at(c.now)), ""); len(fws) != c.want {
			t.Errorf("at %v: %d refused, want %d", c.now, len(fws), c.want)
		}
	}
	if _, ok := s.takePending(first); ok {
		t.Error("the first forward is still pending once refused")
	}
	if fws := s.takeExpired(time.Time{}, "b"); len(fws) != 1 || fws[0].p.Room != "q" {
		t.Errorf("b's lease ended: refused %+v, want q's", fws)
	}
}

// TestRedisRenewLeaseOnExplicitTimes: renewLease, leaseLoop's step, does
// against a real Redis what its leaseClock says of the times it is given. A
// renewal within the lease leaves alone a room taken over meanwhile (the
// node learns it when Redis refuses its writes); one past the lease checks
// the rooms held first, drops the one taken over, and only then gives the
// rooms the new lease, which lets the joiners of the other go on.
func TestRedisRenewLeaseOnExplicitTimes(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a := startNode(t, rs.URL(), 100)
	ownRooms(t, a, "kept", "lost")
	a.takenOver(t, "lost")
	ctx := context.Background()
	var lc leaseClock
	t0 := time.Now()
	lc.renewed(lc.renew(t0))
	calls := func() int { a.h.mu.Lock(); defer a.h.mu.Unlock(); return len(a.h.calls) }

	a.b.renewLease(ctx, &lc, t0.Add(time.Second)) // within the lease
	a.h.mu.Lock()
	lost := a.h.rooms["lost"]
	a.h.mu.Unlock()
	if lost == nil {
		t.Fatal("a renewal within the lease checked the rooms: the room taken over is gone")
	}

	before := calls()
	late := t0.Add(time.Minute) // the node was stopped
	a.b.renewLease(ctx, &lc, late)
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	if a.h.rooms["lost"] != nil || a.h.rooms["kept"] == nil {
		t.Fatalf("after a renewal past the lease: lost %v, kept %v; want lost dropped, kept kept",
			a.h.rooms["lost"] != nil, a.h.rooms["kept"] != nil)
	}
	got := a.h.calls[before:]
	// leaseLoop, running meanwhile, renews a lease that never lapsed by
	// its own clock: it tells the rooms nothing.
	dropped, leased := slices.Index(got, "drop lost"), slices.Index(got, "lease renewed")
	if dropped < 0 || leased < dropped {
		t.Fatalf("calls %q: want lost dropped, then the lease (which lets kept's joiners in)", got)
	}
	if want := late.Add(nodeLease - leaseMargin); !lc.until.Equal(want) {
		t.Errorf("lease until %v after the late renewal, want %v", lc.until.Sub(late), want.Sub(late))
	}
}
