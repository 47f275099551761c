package broker

import (
	"testing"
	"time"
)

func TestTransitBuckets(t *testing.T) {
	const ms = int64(time.Millisecond)
	var tr transit
	for _, c := range []struct {
		sent, now int64
		bucket    int
	}{
		{100 * ms, 100 * ms, 0},    // no time
		{100 * ms, 99 * ms, 0},     // the sender's clock ahead: no time
		{0, ms / 4, 0},             // on the first bound
		{0, ms/4 + 1, 1},           // just past it
		{0, 3 * ms, 4},             // 2.5 ms < 3 ms <= 5 ms
		{0, 5000 * ms, 13},         // the last bound
		{0, 5000*ms + 1, 14},       // beyond every bound
		{1000 * ms, 1700 * ms, 11}, // 500 ms < 700 ms <= 1 s
	} {
		before := tr.read()
		tr.observe(c.sent, c.now)
		after := tr.read()
		for i := range after.Counts {
			want := before.Counts[i]
			if i == c.bucket {
				want++
			}
			if after.Counts[i] != want {
				t.Errorf("sent %d, now %d: bucket %d holds %d, want %d", c.sent, c.now, i, after.Counts[i], want)
			}
		}
	}
	l := tr.read()
	if l.Count != 8 || len(l.Bounds) != 14 || len(l.Counts) != 15 || l.Bounds[2] != 0.001 {
		t.Errorf("read %+v", l)
	}
	if want := (3*ms + 5000*ms + 5000*ms + 1 + ms/4 + ms/4 + 1 + 700*ms); l.Sum != time.Duration(want).Seconds() {
		t.Errorf("sum %v s, want %v", l.Sum, time.Duration(want).Seconds())
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
