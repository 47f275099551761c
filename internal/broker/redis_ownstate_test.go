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
func TestBlockSetKeepsEachRoomsOrder(t *testing.T) {
	s := newBlockSet()
	if s.hold(pub("r", "early")) {
		t.Fatal("held a publish of a room that is not blocked")
	}
	first := pub("r", "1")
	if s.block("r", &first) {
		t.Fatal("a new block reported the room blocked already")
	}
	if !s.block("r", nil) {
		t.Fatal("a second block did not report the room blocked")
	}
	if !s.hold(pub("r", "2")) {
		t.Fatal("a publish of a blocked room was not held")
	}
	if s.hold(pub("other", "x")) {
		t.Fatal("held a publish of another room")
	}
	batch := []job{{kind: jobPublish, p: pub("r", "3")}, {kind: jobPublish, p: pub("other", "y")}, {kind: jobPersist, room: "r"}}
	kept := s.divert(batch)
	if len(kept) != 2 || kept[0].p.Room != "other" || kept[1].kind != jobPersist {
		t.Fatalf("divert kept %+v, want other's publish and r's write", kept)
	}
	var released []Publication
	s.release("r", func(q []Publication) {
		released = q
		if s.mu.TryLock() {
			s.mu.Unlock()
			t.Error("release handed the publishes out without holding the lock")
		}
	})
	if want := []string{"1", "2", "3"}; !slices.Equal(texts(released), want) {
		t.Errorf("released %v, want %v", texts(released), want)
	}
	if s.hold(pub("r", "4")) {
		t.Error("held a publish after the room was released")
	}
}

func TestBlockSetTakeAll(t *testing.T) {
	s := newBlockSet()
	a, b := pub("a", "a1"), pub("b", "b1")
	s.block("a", &a)
	s.block("b", &b)
	s.hold(pub("a", "a2"))
	got := texts(s.takeAll())
	slices.Sort(got)
	if want := []string{"a1", "a2", "b1"}; !slices.Equal(got, want) {
		t.Errorf("takeAll %v, want %v", got, want)
	}
	if s.n.Load() != 0 || s.hold(pub("a", "a3")) {
		t.Error("rooms still blocked after takeAll")
	}
}

func TestGrantSet(t *testing.T) {
	g := newGrantSet()
	g.add("a")
	g.add("b")
	if !g.has("a") || g.has("c") || g.len() != 2 {
		t.Fatalf("after adding a and b: has(a)=%v has(c)=%v len=%d", g.has("a"), g.has("c"), g.len())
	}
	rooms := g.rooms()
	slices.Sort(rooms)
	if !slices.Equal(rooms, []string{"a", "b"}) {
		t.Errorf("rooms %v, want [a b]", rooms)
	}
	if !g.take("a") || g.take("a") || g.has("a") {
		t.Error("take: the first should report the room held, the second not")
	}
}
