package histogram

import (
	"math"
	"testing"
	"time"
)

func TestObserveBuckets(t *testing.T) {
	h := New(time.Millisecond, 10*time.Millisecond, 100*time.Millisecond)
	for _, c := range []struct {
		d      time.Duration
		bucket int
	}{
		{0, 0},
		{time.Millisecond, 0},     // on the first bound
		{time.Millisecond + 1, 1}, // just past it
		{50 * time.Millisecond, 2},
		{100 * time.Millisecond, 2}, // the last bound
		{time.Second, 3},            // beyond every bound
	} {
		before := h.Snapshot()
		h.Observe(c.d)
		after := h.Snapshot()
		for i := range after.Counts {
			want := before.Counts[i]
			if i == c.bucket {
				want++
			}
			if after.Counts[i] != want {
				t.Errorf("%v: bucket %d holds %d, want %d", c.d, i, after.Counts[i], want)
			}
		}
	}
	s := h.Snapshot()
	if s.Count != 6 || len(s.Bounds) != 3 || len(s.Counts) != 4 || s.Bounds[1] != 0.01 {
		t.Errorf("snapshot %+v", s)
	}
	if want := (2*time.Millisecond + 1 + 150*time.Millisecond + time.Second).Seconds(); s.Sum != want {
		t.Errorf("sum %v s, want %v", s.Sum, want)
	}
}

// Histograms of the same bounds add up: the server sums its loops'.
func TestAddTo(t *testing.T) {
	a, b := New(time.Millisecond), New(time.Millisecond)
	a.Observe(time.Microsecond)
	b.Observe(time.Second)
	b.Observe(time.Microsecond)
	s := Empty(time.Millisecond)
	a.AddTo(&s)
	b.AddTo(&s)
	if s.Count != 3 || s.Counts[0] != 2 || s.Counts[1] != 1 {
		t.Errorf("sum %+v, want 2 in the first bucket and 1 beyond", s)
	}
	// Each histogram's sum is added in seconds: to within a float's rounding.
	if want := (2*time.Microsecond + time.Second).Seconds(); math.Abs(s.Sum-want) > 1e-12 {
		t.Errorf("sum %v s, want %v", s.Sum, want)
	}
}

// Observe allocates nothing: it runs once a flush on every event loop.
func TestObserveAllocs(t *testing.T) {
	h := New(time.Millisecond, time.Second)
	if n := testing.AllocsPerRun(1000, func() { h.Observe(time.Microsecond) }); n != 0 {
		t.Errorf("Observe allocates %v times", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	h := New(10*time.Microsecond, 100*time.Microsecond, time.Millisecond, 10*time.Millisecond, 100*time.Millisecond, time.Second)
	b.ReportAllocs()
	for b.Loop() {
		h.Observe(500 * time.Microsecond)
	}
}
