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
	if due, next := k.take(t0); len(due) != 0 || next != keepAliveMax {
		t.Fatalf("no rooms: due %v, next look in %v", names(due), next)
	}
	k.add("hour", time.Hour, t0) // renewed every 15 min, to 75 min
	k.add("short", 8*time.Second, t0)
	k.add("gone", time.Hour, t0)
	k.remove("gone")
	k.remove("never added")
	if due, next := k.take(t0.Add(time.Second)); len(due) != 0 || next != time.Second {
		t.Fatalf("just loaded: due %v, next look in %v, want none and 1s (the short room at 2s)", names(due), next)
	}
	due, next := k.take(t0.Add(2 * time.Second))
	if !slices.Equal(names(due), []string{"short"}) || due[0].ttl != 10*time.Second || next != 2*time.Second {
		t.Fatalf("at 2s: due %v (%+v), next look in %v, want short for 10s, then 2s", names(due), due, next)
	}
	due, _ = k.take(t0.Add(15 * time.Minute))
	ttls := map[string]time.Duration{}
	for _, r := range due {
		ttls[r.name] = r.ttl
	}
	if !slices.Equal(names(due), []string{"hour", "short"}) || ttls["hour"] != 75*time.Minute || ttls["short"] != 10*time.Second {
		t.Fatalf("at 15 min: due %+v, want hour for 75 min and short for 10s", due)
	}
	k.failed(due)
	if due, _ := k.take(t0.Add(15*time.Minute + time.Millisecond)); !slices.Equal(names(due), []string{"hour", "short"}) {
		t.Fatalf("after a failed renewal: due %v, want both again", names(due))
	}
	k.add("tiny", 200*time.Millisecond, t0.Add(16*time.Minute))
	if _, next := k.take(t0.Add(16 * time.Minute)); next != keepAliveMin {
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

// BenchmarkKeptRoomsTake is one look over 100,000 kept rooms, none of them
// due: what a look holds keptRooms.mu for (ns/room). Publishes never take
// that lock; loads and unsubscriptions wait for it.
func BenchmarkKeptRoomsTake(b *testing.B) {
	now := time.Unix(1_000_000, 0)
	k := newKeptRooms()
	const rooms = 100_000
	for i := range rooms {
		k.add(strconv.Itoa(i), 24*time.Hour, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if due, _ := k.take(now); len(due) != 0 {
			b.Fatalf("%d rooms due", len(due))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rooms, "ns/room")
}
