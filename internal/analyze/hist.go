package analyze

import (
	"math"
	"math/big"
	"math/bits"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histograms. Per step, latencies go to an HdrHistogram with 3
// significant digits (every recorded value is within 0.1 % of its bucket's
// bounds) over 0 µs … 24 h; count, sum, sum of squares, min and max are kept
// exactly beside it, so mean, standard deviation and max are exact.
const (
	histMaxUS   = 24 * 3600 * 1_000_000
	histSigFigs = 3
)

// latAcc accumulates the latencies of one step (or of everything).
type latAcc struct {
	hist      *hdrhistogram.Histogram
	n         int64
	sum       int64
	sqHi      uint64 // sum of squares, 128 bits
	sqLo      uint64
	min, max  int64
	negative  int64 // latencies below zero (clocks), recorded as 0
	overrange int64 // latencies above 24 h, recorded as 24 h
}

// newLatAcc returns an empty accumulator; its 230 kB histogram is made on
// the first value, so that steps seen only on orphans or bad rows cost
// nothing.
func newLatAcc() *latAcc {
	return &latAcc{min: math.MaxInt64, max: math.MinInt64}
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMaxUS, histSigFigs) }

func (a *latAcc) record(v int64) {
	a.n++
	a.sum += v
	if v < a.min {
		a.min = v
	}
	if v > a.max {
		a.max = v
	}
	av := v
	if av < 0 {
		a.negative++
		av = -av
	}
	hi, lo := bits.Mul64(uint64(av), uint64(av))
	var c uint64
	a.sqLo, c = bits.Add64(a.sqLo, lo, 0)
	a.sqHi += hi + c
	h := v
	if h < 0 {
		h = 0
	} else if h > histMaxUS {
		a.overrange++
		h = histMaxUS
	}
	if a.hist == nil {
		a.hist = newHist()
	}
	_ = a.hist.RecordValue(h) // cannot fail: h is within the range
}

func (a *latAcc) merge(b *latAcc) {
	if b.hist != nil {
		if a.hist == nil {
			a.hist = newHist()
		}
		a.hist.Merge(b.hist)
	}
	a.n += b.n
	a.sum += b.sum
	var c uint64
	a.sqLo, c = bits.Add64(a.sqLo, b.sqLo, 0)
	a.sqHi += b.sqHi + c
	a.min = min(a.min, b.min)
	a.max = max(a.max, b.max)
	a.negative += b.negative
	a.overrange += b.overrange
}

// meanStd returns the exact mean and population standard deviation in µs,
// computed from the integer sums: var = (n·Σx² − (Σx)²) / n².
func (a *latAcc) meanStd() (mean, std float64) {
	if a.n == 0 {
		return 0, 0
	}
	n := new(big.Int).SetInt64(a.n)
	sq := new(big.Int).SetUint64(a.sqHi)
	sq.Lsh(sq, 64).Add(sq, new(big.Int).SetUint64(a.sqLo))
	s := new(big.Int).SetInt64(a.sum)
	num := new(big.Int).Mul(n, sq)
	num.Sub(num, new(big.Int).Mul(s, s))
	den := new(big.Int).Mul(n, n)
	v, _ := new(big.Rat).SetFrac(num, den).Float64()
	m, _ := new(big.Rat).SetFrac(s, n).Float64()
	return m, math.Sqrt(math.Max(v, 0))
}

// quantiles returns, for each q in (0, 1], the nearest-rank value: the
// smallest recorded value v such that at least q·n values are ≤ v (rank
// ⌈q·n⌉), read from the histogram as the upper bound of v's bucket and
// capped at the exact max. HdrHistogram's own ValueAtQuantile rounds the rank
// to nearest instead, which is not the textbook definition.
func (a *latAcc) quantiles(qs []float64) []int64 {
	out := make([]int64, len(qs))
	if a.hist == nil || a.hist.TotalCount() == 0 {
		return out
	}
	total := a.hist.TotalCount()
	if total == 0 {
		return out
	}
	ranks := make([]int64, len(qs))
	for i, q := range qs {
		r := int64(math.Ceil(q*float64(total) - 1e-9))
		ranks[i] = min(max(r, 1), total)
	}
	var cum int64
	bars := a.hist.Distribution()
	j := 0
	for _, b := range bars {
		if b.Count == 0 {
			continue
		}
		cum += b.Count
		for j < len(qs) && ranks[j] <= cum {
			out[j] = min(b.To, max(a.max, 0))
			j++
		}
		if j == len(qs) {
			break
		}
	}
	return out
}

// logHist is a small log-linear histogram for the per-interval time series:
// 16 linear sub-buckets per power of two, so a value is known within 6.25 %;
// 2.2 kB per interval instead of the 230 kB of a full HdrHistogram.
type logHist struct {
	counts [logHistLen]uint32
	n      uint32
}

const (
	logSubBits = 4
	logHistLen = 560 // covers up to 2^37 µs ≈ 38 h
)

func logIndex(v int64) int {
	if v < 1<<(logSubBits+1) {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 1 - logSubBits
	i := (e+1)<<logSubBits + int(v>>uint(e)) - 1<<logSubBits
	return min(i, logHistLen-1)
}

// logUpper returns the largest value of bucket i.
func logUpper(i int) int64 {
	if i < 1<<(logSubBits+1) {
		return int64(i)
	}
	e := i>>logSubBits - 1
	m := int64(i&(1<<logSubBits-1) + 1<<logSubBits)
	return (m+1)<<uint(e) - 1
}

func (h *logHist) record(v int64) {
	h.counts[logIndex(v)]++
	h.n++
}

func (h *logHist) merge(o *logHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the nearest-rank q-quantile (upper bucket bound).
func (h *logHist) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	r := uint32(math.Ceil(q*float64(h.n) - 1e-9))
	r = max(r, 1)
	var cum uint32
	for i, c := range h.counts {
		cum += c
		if cum >= r {
			return logUpper(i)
		}
	}
	return logUpper(logHistLen - 1)
}
