package broker

import (
	"slices"
	"testing"
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
