package broker

import (
	"slices"
	"testing"
	"time"
)

func TestOwnStateGrants(t *testing.T) {
	g := newOwnState()
	g.grant("a", 0)
	g.grant("b", 7)
	if !g.holds("a") || g.holds("c") || g.heldCount() != 2 {
		t.Fatalf("after adding a and b: holds(a)=%v holds(c)=%v heldCount=%d", g.holds("a"), g.holds("c"), g.heldCount())
	}
	rooms := g.heldRooms()
	slices.Sort(rooms)
	if !slices.Equal(rooms, []string{"a", "b"}) {
		t.Errorf("heldRooms %v, want [a b]", rooms)
	}
	// A room granted again keeps the larger from: its order here starts
	// after every seq handed out before either grant.
	for _, step := range []struct {
		from, want uint64
	}{{3, 7}, {9, 9}, {0, 9}} {
		g.grant("b", step.from)
		if from, ok := g.heldFrom("b"); !ok || from != step.want {
			t.Errorf("granted from %d again: heldFrom %d, %v; want %d", step.from, from, ok, step.want)
		}
	}
	if g.heldCount() != 2 {
		t.Errorf("heldCount %d after granting b again, want 2", g.heldCount())
	}
	if !g.giveUp("a") || g.giveUp("a") || g.holds("a") || g.heldCount() != 1 {
		t.Error("giveUp: the first should report the room held, the second not")
	}
	if _, ok := g.heldFrom("a"); ok {
		t.Error("heldFrom reports a room given up")
	}
	g.grant("a", 2)
	if from, _ := g.heldFrom("a"); from != 2 {
		t.Errorf("a room given up and granted anew: from %d, want 2 (the new grant's)", from)
	}
}

// A node found unheard is kept until its mark comes back (takeMark, once)
// or, lost, until the sweep's deadline (takeMarksBefore).
func TestOwnStateMarksUnheardNodes(t *testing.T) {
	s := newOwnState()
	t0 := time.Now()
	a, b := s.markUnheard("a", t0), s.markUnheard("b", t0.Add(time.Second))
	if node, ok := s.takeMark(a); !ok || node != "a" {
		t.Errorf("takeMark(a) = %q, %v, want a", node, ok)
	}
	if _, ok := s.takeMark(a); ok {
		t.Errorf("a mark taken twice")
	}
	if got := s.takeMarksBefore(t0.Add(time.Second)); len(got) != 0 {
		t.Errorf("marks before b's time: %q, want none", got)
	}
	if got := s.takeMarksBefore(t0.Add(2 * time.Second)); len(got) != 1 || got[0] != "b" {
		t.Errorf("marks lost: %q, want b", got)
	}
	if _, ok := s.takeMark(b); ok {
		t.Errorf("b's mark came back after it was taken as lost")
	}
}

// The broker, not the rooms, decides whether a room's joiners wait
// (JoinGate) and whether a room may order here (publishOwned): only a
// room held here, only while the lease has lapsed, and only until the
// room is given up.
func TestRedisJoinsWaitForAHeldRoomWhileTheLeaseLapsed(t *testing.T) {
	h := newFakeRooms()
	b := &Redis{own: newOwnState(), h: h}
	h.open("r")
	h.Loaded("r", "e", 0, nil)
	b.own.grant("r", 0)
	p := Publication{Room: "r", Prefix: []byte(`{"seq":`), Suffix: []byte(`}`)}
	for _, c := range []struct {
		name          string
		until         time.Time
		room          string
		wait, ordered bool
	}{
		{"no lease yet", time.Time{}, "r", true, false},
		{"leased", time.Now().Add(time.Minute), "r", false, true},
		{"a room not held, leased", time.Now().Add(time.Minute), "other", false, false},
		{"lapsed", time.Now().Add(-time.Second), "r", true, false},
		{"a room not held, lapsed", time.Now().Add(-time.Second), "other", false, false},
	} {
		b.lease.until.Store(c.until.UnixNano())
		if got := b.JoinsWait(c.room); got != c.wait {
			t.Errorf("%s: JoinsWait(%s) = %v, want %v", c.name, c.room, got, c.wait)
		}
		p.Room = c.room
		if _, got := b.publishOwned(p); got != c.ordered {
			t.Errorf("%s: publishOwned(%s) ordered %v, want %v", c.name, c.room, got, c.ordered)
		}
	}
	b.own.giveUp("r")
	if b.JoinsWait("r") {
		t.Error("a room given up still holds its joiners back")
	}
}
