package analyze

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// Window is what the messages of one step due within one interval got: the
// deliveries they were owed, those they received and the latencies of
// those. scalechat diff resamples a run's windows to put an interval around
// a change (internal/diff); Options.Windows asks for them.
type Window struct {
	Step     string
	UnixUS   int64 // interval start
	Expected int64
	Received int64
	Latency  *WindowHist
}

// WindowHist is a log-linear latency histogram in µs with 128 linear
// sub-buckets per power of two: a value is known within 0.8 % (exactly
// below 256 µs). Its buckets grow with the largest value recorded, so a
// window of sub-millisecond latencies costs about 4 kB.
type WindowHist struct {
	counts []uint64
	n      uint64
}

const winSubBits = 7

func winIndex(v int64) int {
	if v < 1<<(winSubBits+1) {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 - winSubBits
	return (e+1)<<winSubBits + int(v>>uint(e)) - 1<<winSubBits
}

// winUpper returns the largest value of bucket i.
func winUpper(i int) int64 {
	if i < 1<<(winSubBits+1) {
		return int64(i)
	}
	e := i>>winSubBits - 1
	m := int64(i&(1<<winSubBits-1) + 1<<winSubBits)
	return (m+1)<<uint(e) - 1
}

// Record adds one latency in µs; a negative one counts as 0.
func (h *WindowHist) Record(us int64) {
	i := winIndex(us)
	if i >= len(h.counts) {
		h.counts = slices.Grow(h.counts, i+1-len(h.counts))[:i+1]
	}
	h.counts[i]++
	h.n++
}

// Add adds the counts of o to h.
func (h *WindowHist) Add(o *WindowHist) {
	if len(o.counts) > len(h.counts) {
		h.counts = slices.Grow(h.counts, len(o.counts)-len(h.counts))[:len(o.counts)]
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// Reset empties h, keeping its memory.
func (h *WindowHist) Reset() {
	clear(h.counts)
	h.n = 0
}

// Count is the number of latencies recorded.
func (h *WindowHist) Count() uint64 { return h.n }

// Quantiles returns, for each q of qs (in increasing order), the
// nearest-rank latency in µs, read as its bucket's upper bound; all zero
// when h is empty.
func (h *WindowHist) Quantiles(qs []float64) []int64 {
	out := make([]int64, len(qs))
	if h.n == 0 {
		return out
	}
	j := 0
	var cum uint64
	for i, c := range h.counts {
		cum += c
		for j < len(qs) && cum >= rank(qs[j], h.n) {
			out[j] = winUpper(i)
			j++
		}
		if j == len(qs) {
			break
		}
	}
	return out
}

func rank(q float64, n uint64) uint64 {
	return max(uint64(math.Ceil(q*float64(n)-1e-9)), 1)
}

// winAcc is one partition's figures of one window.
type winAcc struct {
	expected, received int64
	hist               WindowHist
}

func (s *partition) winAt(step uint32, due int64) *winAcc {
	k := seriesKey{step, floorDiv(due, s.interval)}
	a := s.wins[k]
	if a == nil {
		a = &winAcc{}
		s.wins[k] = a
	}
	return a
}

// windows merges the partitions' windows of the steps reported, in step
// order and then time order.
func windows(nm *names, partitions []*partition, interval int64) []Window {
	merged := make(map[seriesKey]*winAcc)
	for _, sh := range partitions {
		for k, a := range sh.wins {
			m := merged[k]
			if m == nil {
				m = &winAcc{}
				merged[k] = m
			}
			m.expected += a.expected
			m.received += a.received
			m.hist.Add(&a.hist)
		}
	}
	out := make([]Window, 0, len(merged))
	for k, a := range merged {
		out = append(out, Window{Step: nm.stepList[k.step], UnixUS: k.idx * interval,
			Expected: a.expected, Received: a.received, Latency: &a.hist})
	}
	slices.SortFunc(out, func(a, b Window) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.UnixUS, b.UnixUS))
	})
	return out
}

// Each calls fn for every bucket that holds latencies, in increasing order,
// with the bucket's upper bound in µs and its count.
func (h *WindowHist) Each(fn func(upperUS int64, n uint64)) {
	for i, c := range h.counts {
		if c > 0 {
			fn(winUpper(i), c)
		}
	}
}
