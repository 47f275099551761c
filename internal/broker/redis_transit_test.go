package broker

import (
	"slices"
	"testing"
	"time"
)

// transit counts a payload's time from its sender's clock to this node's
// (the histogram itself is internal/histogram's, tested there): a sender's
// clock ahead counts as no time, and the bounds run from 250 µs to 5 s.
func TestTransitBuckets(t *testing.T) {
	const ms = int64(time.Millisecond)
	tr := newTransit()
	tr.observe(100*ms, 99*ms)    // the sender's clock ahead: no time
	tr.observe(0, 3*ms)          // 2.5 ms < 3 ms <= 5 ms
	tr.observe(0, 5000*ms+1)     // beyond every bound
	tr.observe(1000*ms, 1700*ms) // 500 ms < 700 ms <= 1 s
	l := tr.read()
	if len(l.Bounds) != 14 || len(l.Counts) != 15 || l.Bounds[0] != 0.00025 || l.Bounds[13] != 5 {
		t.Fatalf("bounds %v", l.Bounds)
	}
	want := make([]uint64, 15)
	want[0], want[4], want[14], want[11] = 1, 1, 1, 1
	if !slices.Equal(l.Counts, want) || l.Count != 4 {
		t.Errorf("counts %v (%d), want %v", l.Counts, l.Count, want)
	}
	if want := time.Duration(3*ms + 5000*ms + 1 + 700*ms).Seconds(); l.Sum != want {
		t.Errorf("sum %v s, want %v", l.Sum, want)
	}
}

// A follower measures the rounds its owner sends it.
func TestRedisTransitMeasured(t *testing.T) {
	owner, follower := startOwnerNodes(t, []string{"r"})
	before := follower.b.Stats().Transit.Count
	owner.publish("r", "x")
	follower.hasSeq(t, "r", 1)
	st := follower.b.Stats().Transit
	if st.Count <= before || st.Sum <= 0 {
		t.Fatalf("transit %+v after a round from the owner (%d before)", st, before)
	}
}
