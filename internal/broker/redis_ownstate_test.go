package broker

import (
	"slices"
	"testing"
)

func texts(ps []Publication) []string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p.Prefix))
	}
	return out
}

func pub(room, text string) Publication { return Publication{Room: room, Prefix: []byte(text)} }

// A blocked room's publishes leave in the order they came, whichever way
// they came (blocking, Publish, a round's batch); other rooms' pass.
func TestOwnStateKeepsEachBlockedRoomsOrder(t *testing.T) {
	s := newOwnState()
	if s.holdBack(pub("r", "early")) {
		t.Fatal("held a publish of a room that is not blocked")
	}
	first := pub("r", "1")
	if s.block("r", &first) {
		t.Fatal("a new block reported the room blocked already")
	}
	if !s.block("r", nil) {
		t.Fatal("a second block did not report the room blocked")
	}
	if !s.holdBack(pub("r", "2")) {
		t.Fatal("a publish of a blocked room was not held")
	}
	if s.holdBack(pub("other", "x")) {
		t.Fatal("held a publish of another room")
	}
	batch := []job{{kind: jobPublish, p: pub("r", "3")}, {kind: jobPublish, p: pub("other", "y")}, {kind: jobPersist, room: "r"}}
	kept := s.divert(batch)
	if len(kept) != 2 || kept[0].p.Room != "other" || kept[1].kind != jobPersist {
		t.Fatalf("divert kept %+v, want other's publish and r's write", kept)
	}
	var released []Publication
	s.unblock("r", func(q []Publication) {
		released = q
		if s.mu.TryLock() {
			s.mu.Unlock()
			t.Error("unblock handed the publishes out without holding the lock")
		}
	})
	if want := []string{"1", "2", "3"}; !slices.Equal(texts(released), want) {
		t.Errorf("released %v, want %v", texts(released), want)
	}
	if s.holdBack(pub("r", "4")) {
		t.Error("held a publish after the room was released")
	}
}

func TestOwnStateUnblockAll(t *testing.T) {
	s := newOwnState()
	a, b := pub("a", "a1"), pub("b", "b1")
	s.block("a", &a)
	s.block("b", &b)
	s.holdBack(pub("a", "a2"))
	got := texts(s.unblockAll())
	slices.Sort(got)
	if want := []string{"a1", "a2", "b1"}; !slices.Equal(got, want) {
		t.Errorf("unblockAll %v, want %v", got, want)
	}
	if s.nBlocked.Load() != 0 || s.holdBack(pub("a", "a3")) {
		t.Error("rooms still blocked after unblockAll")
	}
}

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
