// Package histogram counts durations in buckets of fixed upper bounds,
// without a lock: the latency histograms of the hot paths (an event loop's
// message processing time, a hook's calls, the rounds other nodes send a
// cluster node), read as a Snapshot for /metrics. It is a leaf: it knows
// nothing of what it measures.
package histogram

import (
	"sync/atomic"
	"time"
)

// Histogram counts durations in the buckets its bounds make. Observe and
// the reads may run at once from any goroutine: every count is an atomic
// word of its own (uncontended when one goroutine observes, as each event
// loop does its own).
type Histogram struct {
	bounds []time.Duration // upper bounds, increasing
	counts []atomic.Uint64 // one more than bounds: the last counts what exceeds every bound
	sum    atomic.Int64    // nanoseconds
}

// New returns an empty histogram whose buckets end at bounds, increasing;
// a last bucket counts what exceeds them all.
func New(bounds ...time.Duration) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts d: in the first bucket whose bound is at least d.
func (h *Histogram) Observe(d time.Duration) {
	lo, hi := 0, len(h.bounds)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if d > h.bounds[mid] {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	h.counts[lo].Add(1)
	h.sum.Add(int64(d))
}

// Snapshot is a histogram as read at one moment.
type Snapshot struct {
	Bounds []float64 // upper bounds of the buckets, seconds, increasing
	Counts []uint64  // observations per bucket (not cumulative); one more than Bounds, the last for larger values
	Count  uint64    // observations, the sum of Counts
	Sum    float64   // seconds
}

// Empty returns a snapshot with the buckets bounds make and nothing
// counted: the sum of several histograms with those bounds starts from it
// (AddTo).
func Empty(bounds ...time.Duration) Snapshot {
	s := Snapshot{Bounds: make([]float64, len(bounds)), Counts: make([]uint64, len(bounds)+1)}
	for i, b := range bounds {
		s.Bounds[i] = b.Seconds()
	}
	return s
}

// Snapshot returns what h has counted.
func (h *Histogram) Snapshot() Snapshot {
	s := Empty(h.bounds...)
	h.AddTo(&s)
	return s
}

// AddTo adds what h has counted to s, which has h's buckets (Empty of its
// bounds). The
// sum is read before the counts: an observation landing between the reads
// then shows in the counts, never in the sum alone.
func (h *Histogram) AddTo(s *Snapshot) {
	s.Sum += time.Duration(h.sum.Load()).Seconds()
	for i := range h.counts {
		n := h.counts[i].Load()
		s.Counts[i] += n
		s.Count += n
	}
}
