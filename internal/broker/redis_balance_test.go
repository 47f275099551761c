package broker

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

func TestCedeCount(t *testing.T) {
	for _, c := range []struct {
		owned, followed, want int
	}{
		{0, 0, 0},
		{8, 0, 0},      // within the slack
		{9, 0, 4},      // past it: half the difference
		{990, 10, 256}, // at most maxCedes a round
		{500, 500, 0},  // even
		{10, 990, 0},   // owning fewer: the other node cedes
		{120, 100, 0},  // within a tenth of all shared rooms
		{130, 100, 15},
	} {
		if got := cedeCount(c.owned, c.followed); got != c.want {
			t.Errorf("cedeCount(%d, %d) = %d, want %d", c.owned, c.followed, got, c.want)
		}
	}
}

// A revoke waits for those inside the grant, and nobody enters after it:
// what it hands on is the room's last seq.
func TestOwnStateRevokeWaitsForThoseInside(t *testing.T) {
	s := newOwnState()
	s.grant("r", 5)
	g, from, ok := s.enter("r")
	if !ok || from != 5 {
		t.Fatalf("enter = %d, %v; want 5, true", from, ok)
	}
	revoked := make(chan bool)
	go func() { revoked <- s.revoke("r") }()
	select {
	case <-revoked:
		t.Fatal("revoke returned while a publish was inside the grant")
	case <-time.After(20 * time.Millisecond):
	}
	g.leave()
	if !<-revoked {
		t.Fatal("revoke of a held room reported false")
	}
	if _, _, ok := s.enter("r"); ok {
		t.Error("entered a revoked grant")
	}
	if s.revoke("r") {
		t.Error("a grant revoked twice")
	}
	if !s.holds("r") {
		t.Error("a revoked grant is no longer held: JoinsWait and the keys' renewal need it until it is given up")
	}
	s.unrevoke("r")
	if g, _, ok := s.enter("r"); !ok {
		t.Error("could not enter a grant revoked and let go again")
	} else {
		g.leave()
	}
	s.revoke("r")
	s.grant("r", 7) // handed back while a cede was on its way: a grant of its own
	if g, from, ok := s.enter("r"); !ok || from != 7 {
		t.Errorf("after a new grant: enter = %d, %v; want 7, true", from, ok)
	} else {
		g.leave()
	}
}

// Which forwards a node parks: those its room's owner of record sends it
// (the owner is ceding the room here), never those of the node it cedes
// the room to itself (sent before that node read its handover record: no
// record will come here), and none of a room it holds.
func TestOwnStateParksOnlyAForwardOfTheRoomsCedingOwner(t *testing.T) {
	fw := func(from string) followRec { return followRec{kind: recForward, room: "r", node: from, req: 1} }
	for _, c := range []struct {
		name string
		set  func(s *ownState)
		from string
		want bool
	}{
		{"followed from a, a forwards", func(s *ownState) { s.setOwner("r", "a") }, "a", true},
		{"followed from a, c forwards", func(s *ownState) { s.setOwner("r", "a") }, "c", false},
		{"not followed", func(*ownState) {}, "a", false},
		{"held here", func(s *ownState) { s.grant("r", 0) }, "a", false},
		{"ceding to b, b forwards", func(s *ownState) { s.cedeTo("r", "b") }, "b", false},
		{"ceded to b, its record read, b forwards", func(s *ownState) {
			s.cedeTo("r", "b")
			s.setOwner("r", "b") // the handover's W
		}, "b", true},
		{"a cede that did not happen, then followed from b", func(s *ownState) {
			s.cedeTo("r", "b")
			s.clearOwner("r", "b")
			s.setOwner("r", "b")
		}, "b", true},
	} {
		s := newOwnState()
		c.set(&s)
		if got := s.park(fw(c.from), time.Now()); got != c.want {
			t.Errorf("%s: park = %v, want %v", c.name, got, c.want)
		}
	}
}

// cedeHeldAtRevoke starts two nodes sharing room r, a holding it and b
// following it with one message, and a's cede of r to b, held at its
// revoke (after the room's owner at a became b) by a publish inside the
// grant: the test lets go of g to let the cede go on; ceded closes when it
// returns.
func cedeHeldAtRevoke(t *testing.T) (a, b *node, g *grant, ceded chan struct{}) {
	t.Helper()
	rs := testsupport.StartRedis(t)
	cfg := Config{URL: rs.URL(), History: 1000, TTL: time.Hour}
	a, b = startNodeConfig(t, cfg), startNodeConfig(t, cfg)
	a.join(t, "r")
	a.waitHeld(t, "r")
	b.join(t, "r")
	a.publish("r", "a0")
	b.hasSeq(t, "r", 1)
	var ok bool
	g, _, ok = a.b.own.enter("r")
	if !ok {
		t.Fatal("a does not order r")
	}
	ceded = make(chan struct{})
	go func() { defer close(ceded); a.b.cede("r", b.b.id) }()
	v, _ := a.b.own.granted.Load("r")
	for deadline := time.Now().Add(10 * time.Second); !v.(*grant).revoked.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("waiting for the cede to revoke a's holding")
		}
	}
	return a, b, g, ceded
}

// TestRedisCedingNodeAnswersItsSuccessorsForwardAtOnce: a forward from the
// node a room is being ceded to reaches the ceding node (sent before the
// new owner read its handover record); the ceding node declines it at once
// instead of parking it for the sweep, which held it half a second.
func TestRedisCedingNodeAnswersItsSuccessorsForwardAtOnce(t *testing.T) {
	a, b, g, ceded := cedeHeldAtRevoke(t)
	a.b.onForward(followRec{kind: recForward, room: "r", node: b.b.id, req: 1 << 40, prefix: "b1#"})
	if n := len(a.b.own.takeParked("r")); n != 0 {
		t.Errorf("the ceding node parked %d forward(s) of the node it cedes the room to", n)
	}
	g.leave()
	<-ceded
	b.waitHeld(t, "r")
	acked := make(chan uint64, 1)
	b.h.publishTo(b.b, Publication{Room: "r", Prefix: []byte("b2#"), From: 3}, acked)
	if seq := answerOf(t, acked, "b's publish"); seq != 2 {
		t.Errorf("b's publish after the cede got seq %d, want 2 (the declined forward ordered nowhere)", seq)
	}
}

// TestRedisCedeEvensOutOwnershipWithoutAGap: the node that loaded every
// room first cedes half of them to the other while both publish into all
// of them; every publish is ordered once, both nodes hold one order per
// room with each sender's messages in the order sent, and nothing is
// refused or dropped.
func TestRedisCedeEvensOutOwnershipWithoutAGap(t *testing.T) {
	rs := testsupport.StartRedis(t)
	cfg := Config{URL: rs.URL(), History: 1000, TTL: time.Hour} // balanced by hand, below
	a, b := startNodeConfig(t, cfg), startNodeConfig(t, cfg)
	var rooms []string
	for i := range 20 {
		rooms = append(rooms, fmt.Sprintf("r%d", i))
	}
	for _, r := range rooms {
		a.join(t, r)
		a.waitHeld(t, r)
		b.join(t, r)
	}
	const each = 40 // a node's messages a room
	acked := map[string]chan uint64{}
	for _, r := range rooms {
		acked[r] = make(chan uint64, 2*each)
	}
	for i := range each {
		if i == each/4 {
			go a.b.balance() // 20 shared rooms owned, none followed: 10 ceded
		}
		for _, r := range rooms {
			a.h.publishTo(a.b, Publication{Room: r, Prefix: []byte(fmt.Sprintf("a%d#", i)), From: 3}, acked[r])
			b.h.publishTo(b.b, Publication{Room: r, Prefix: []byte(fmt.Sprintf("b%d#", i)), From: 3}, acked[r])
		}
		time.Sleep(5 * time.Millisecond) // spreads the sends over the cedes; nothing waits on it
	}
	for _, r := range rooms {
		seqs := map[uint64]bool{}
		for range 2 * each {
			seq := answerOf(t, acked[r], "a publish")
			if seq == 0 || seqs[seq] {
				t.Fatalf("%s: a publish answered seq %d (0: refused; or twice)", r, seq)
			}
			seqs[seq] = true
		}
		a.hasSeq(t, r, 2*each)
		b.hasSeq(t, r, 2*each)
		pa, pb := a.h.payloads(r), b.h.payloads(r)
		if !slices.Equal(pa, pb) || len(pa) != 2*each {
			t.Fatalf("%s: the nodes disagree:\n a %q\n b %q", r, pa, pb)
		}
		next := map[byte]int{}
		for i, p := range pa {
			_, text, _ := strings.Cut(p, ":")
			if want := fmt.Sprintf("%c%d#%d", text[0], next[text[0]], i+1); text != want {
				t.Errorf("%s: seq %d is %q, want %q", r, i+1, text, want)
			}
			next[text[0]]++
		}
	}
	sa, sb := a.b.Stats(), b.b.Stats()
	if sa.Ceded != 10 || sa.Owned != 10 || sb.Owned != 10 {
		t.Errorf("ceded %d, owned %d and %d; want 10 ceded and 10 rooms owned by each node", sa.Ceded, sa.Owned, sb.Owned)
	}
	if sa.Refused+sb.Refused+sa.Dropped+sb.Dropped != 0 {
		t.Errorf("refused %d/%d, dropped %d/%d: want none", sa.Refused, sb.Refused, sa.Dropped, sb.Dropped)
	}
}

// TestRedisCedeParksWhatTheOldOwnerSendsAhead: what the ceding node's
// members publish once its holding is revoked goes to the new owner ahead
// of the handover record; the new owner keeps it until the record comes
// and orders it then, so that the sender's next message, sent once the
// handover is done, comes after it. Declined and sent again instead, the
// first two came after the third.
func TestRedisCedeParksWhatTheOldOwnerSendsAhead(t *testing.T) {
	a, b, g, ceded := cedeHeldAtRevoke(t)
	acked := make(chan uint64, 3)
	for _, text := range []string{"a1", "a2"} {
		a.h.publishTo(a.b, Publication{Room: "r", Prefix: []byte(text + "#"), From: 3}, acked)
	}
	g.leave()
	<-ceded
	b.waitHeld(t, "r")
	a.h.publishTo(a.b, Publication{Room: "r", Prefix: []byte("a3#"), From: 3}, acked)
	for range 3 {
		if seq := answerOf(t, acked, "a publish"); seq == 0 {
			t.Fatal("a publish was refused")
		}
	}
	a.hasSeq(t, "r", 4)
	b.hasSeq(t, "r", 4)
	want := []string{"a0#1", "a1#2", "a2#3", "a3#4"}
	for _, n := range []*node{a, b} {
		var got []string
		for _, p := range n.h.payloads("r") {
			_, text, _ := strings.Cut(p, ":")
			got = append(got, text)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %q, want %q", n.b.id, got, want)
		}
	}
}
