package broker

import (
	"slices"
	"testing"
	"time"
)

func TestOwnStateGrants(t *testing.T) {
	g := newOwnState()
	g.grant("a")
	g.grant("b")
	if !g.holds("a") || g.holds("c") || g.heldCount() != 2 {
		t.Fatalf("after adding a and b: holds(a)=%v holds(c)=%v heldCount=%d", g.holds("a"), g.holds("c"), g.heldCount())
	}
	rooms := g.heldRooms()
	slices.Sort(rooms)
	if !slices.Equal(rooms, []string{"a", "b"}) {
		t.Errorf("heldRooms %v, want [a b]", rooms)
	}
	if !g.giveUp("a") || g.giveUp("a") || g.holds("a") {
		t.Error("giveUp: the first should report the room held, the second not")
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
