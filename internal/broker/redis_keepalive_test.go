package broker

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestKeptRooms: which rooms a look renews, when they are due again, and
// when the next look comes.
func TestKeptRooms(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	names := func(rs []keptRoom) []string {
		var ns []string
		for _, r := range rs {
			ns = append(ns, r.name)
		}
		slices.Sort(ns)
		return ns
	}
	k := newKeptRooms()
	// A look two rooms at a time, as subscriptions.dueKept makes it
	// keptChunk at a time.
	take := func(now time.Time) ([]keptRoom, time.Duration) {
		l := newKeptLook(now)
		for k.look(&l, 2) {
		}
		return l.due, l.nextLook()
	}
	if due, next := take(t0); len(due) != 0 || next != keepAliveMax {
		t.Fatalf("no rooms: due %v, next look in %v", names(due), next)
	}
	k.add("hour", time.Hour, t0) // renewed every 15 min, to 75 min
	k.add("short", 8*time.Second, t0)
	k.add("gone", time.Hour, t0)
	k.remove("gone")
	k.remove("never added")
	if due, next := take(t0.Add(time.Second)); len(due) != 0 || next != time.Second {
		t.Fatalf("just loaded: due %v, next look in %v, want none and 1s (the short room at 2s)", names(due), next)
	}
	due, next := take(t0.Add(2 * time.Second))
	if !slices.Equal(names(due), []string{"short"}) || due[0].ttl != 10*time.Second || next != 2*time.Second {
		t.Fatalf("at 2s: due %v (%+v), next look in %v, want short for 10s, then 2s", names(due), due, next)
	}
	due, _ = take(t0.Add(15 * time.Minute))
	ttls := map[string]time.Duration{}
	for _, r := range due {
		ttls[r.name] = r.ttl
	}
	if !slices.Equal(names(due), []string{"hour", "short"}) || ttls["hour"] != 75*time.Minute || ttls["short"] != 10*time.Second {
		t.Fatalf("at 15 min: due %+v, want hour for 75 min and short for 10s", due)
	}
	k.failed(due)
	if due, _ := take(t0.Add(15*time.Minute + time.Millisecond)); !slices.Equal(names(due), []string{"hour", "short"}) {
		t.Fatalf("after a failed renewal: due %v, want both again", names(due))
	}
	k.add("tiny", 200*time.Millisecond, t0.Add(16*time.Minute))
	if _, next := take(t0.Add(16 * time.Minute)); next != keepAliveMin {
		t.Fatalf("a 50ms renewal: next look in %v, want keepAliveMin", next)
	}
	if len(k.rooms) != len(k.at) || len(k.rooms) != 3 {
		t.Fatalf("%d rooms, %d indexed, want 3", len(k.rooms), len(k.at))
	}
	for i, r := range k.rooms {
		if k.at[r.name] != i {
			t.Errorf("room %s at %d, indexed at %d", r.name, i, k.at[r.name])
		}
	}
}

// A room removed between two chunks of a look moves the last room to its
// place, which the look may have passed: the next look comes at once
// instead of after the earliest due the look saw.
func TestKeptLookAfterARemoval(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	k := newKeptRooms()
	k.add("a", time.Hour, t0)
	k.add("b", time.Hour, t0)
	k.add("short", 8*time.Second, t0) // due at 2s
	l := newKeptLook(t0.Add(time.Second))
	if !k.look(&l, 2) {
		t.Fatal("a look two rooms at a time ended after two of three")
	}
	k.remove("a") // short takes a's place, looked at already
	for k.look(&l, 2) {
	}
	if next := l.nextLook(); next != keepAliveMin {
		t.Errorf("next look in %v after a room moved, want keepAliveMin", next)
	}
	l = newKeptLook(t0.Add(time.Second))
	for k.look(&l, 2) {
	}
	if next := l.nextLook(); next != time.Second {
		t.Errorf("the look after: next in %v, want 1s (short, due at 2s)", next)
	}
}

// BenchmarkKeptRoomsLook is one look over 100,000 kept rooms, none of them
// due, keptChunk at a time: what a look holds subscriptions.mu for
// (ns/room; keptChunk times that at most in one go).
func BenchmarkKeptRoomsLook(b *testing.B) {
	now := time.Unix(1_000_000, 0)
	k := newKeptRooms()
	const rooms = 100_000
	for i := range rooms {
		k.add(strconv.Itoa(i), 24*time.Hour, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l := newKeptLook(now)
		for k.look(&l, keptChunk) {
		}
		if len(l.due) != 0 {
			b.Fatalf("%d rooms due", len(l.due))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rooms, "ns/room")
}
