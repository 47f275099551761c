//go:build linux

package server

import (
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/histogram"
)

func TestHistogramBuckets(t *testing.T) {
	tests := []struct {
		d      time.Duration
		bucket int
	}{
		{0, 0},
		{10 * time.Microsecond, 0}, // bounds are inclusive, like Prometheus' le
		{10*time.Microsecond + 1, 1},
		{25 * time.Microsecond, 2},
		{time.Millisecond, 10},
		{10 * time.Second, len(processingBounds) - 1},
		{time.Hour, len(processingBounds)},
	}
	for _, tt := range tests {
		h := histogram.New(processingBounds...)
		h.Observe(tt.d)
		s := h.Snapshot()
		for i, got := range s.Counts {
			want := uint64(0)
			if i == tt.bucket {
				want = 1
			}
			if got != want {
				t.Errorf("%v: bucket %d holds %d, want %d", tt.d, i, got, want)
			}
		}
		if s.Sum != tt.d.Seconds() {
			t.Errorf("%v: sum %v s", tt.d, s.Sum)
		}
	}
}

// A message counts once per loop that has members of its room: two members
// connected one after the other sit on the two loops.
func TestProcessingTimeCountsOncePerLoop(t *testing.T) {
	for _, on := range []bool{true, false} {
		ts := startServer(t, func(c *Config) { c.ProcessingTime = on })
		a1, a2 := connect(t, ts, "two"), connect(t, ts, "two")
		solo := connect(t, ts, "one")
		for range 3 {
			a1.sendJSON(msg("x"))
			a1.next()
			a2.next()
		}
		solo.sendJSON(msg("y"))
		solo.next()
		// A loop records a message's time right after the flush that
		// wrote it, before it reads anything else: once a later message
		// has come through every loop, the first ones are recorded (or,
		// when off, would have been).
		a1.sendJSON(msg("barrier"))
		a1.next()
		a2.next()
		solo.sendJSON(msg("barrier"))
		solo.next()
		want := uint64(0)
		if on {
			want = 4*2 + 2
		}
		// The barriers' own times may still be on their way: poll for them.
		deadline := time.Now().Add(5 * time.Second)
		st := ts.Stats()
		for on && st.Processing.Count < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			st = ts.Stats()
		}
		var sum uint64
		for _, n := range st.Processing.Counts {
			sum += n
		}
		if st.Processing.Count != want || sum != want {
			t.Errorf("processing time on=%v: count %d, bucket sum %d, want %d", on, st.Processing.Count, sum, want)
		}
		if on && (st.Processing.Sum <= 0 || st.Processing.Sum > 5) {
			t.Errorf("processing time sum %gs", st.Processing.Sum)
		}
		if len(st.Processing.Bounds) != len(processingBounds) || st.Processing.Bounds[0] != 10e-6 {
			t.Errorf("bounds %v", st.Processing.Bounds)
		}
		if st.Deliveries != 4*2+2 {
			t.Errorf("deliveries %d", st.Deliveries)
		}
	}
}
