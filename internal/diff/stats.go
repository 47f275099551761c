package diff

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/scalechat/scalechat/internal/results"
)

// Window is what the messages of one step due in one interval of one run
// got: the deliveries owed and received, and their latencies.
type Window struct {
	Expected, Received int64
	// Latency lists the latencies in µs with their counts, in increasing
	// order (the buckets of analyze.WindowHist).
	Latency []Bucket
}

// Bucket is a latency in µs and how many deliveries had it.
type Bucket struct {
	US int64
	N  uint64
}

// CPUWindow is one scrape interval of one server node within a step: the
// CPU seconds it spent and the deliveries it made.
type CPUWindow struct {
	CPUSeconds, Deliveries float64
}

// series is one side's windows of one step, run by run, with their
// latencies as indexes into the step's shared value table.
type series struct {
	runs [][]idxWindow
	cpu  [][]CPUWindow
}

type idxWindow struct {
	expected, received int64
	lat                []idxCount
}

type idxCount struct {
	i int32
	n uint64
}

// figures are what one draw of one side gives. A figure that could not be
// measured is NaN.
type figures struct {
	lat      []float64 // ms, one per latency metric
	delivery float64   // 0…1
	cpu      float64   // µs per delivery
}

// pool adds windows into a histogram over the step's value table.
type pool struct {
	values []int64 // µs, sorted
	counts []uint64
	n      uint64
	exp    int64
	recv   int64
	cpu    float64
	dels   float64
}

func (p *pool) reset() {
	clear(p.counts)
	p.n, p.exp, p.recv, p.cpu, p.dels = 0, 0, 0, 0, 0
}

func (p *pool) add(w *idxWindow) {
	p.exp += w.expected
	p.recv += w.received
	for _, c := range w.lat {
		p.counts[c.i] += c.n
		p.n += c.n
	}
}

// figures reads the pool's figures for the latency quantiles qs.
func (p *pool) figures(qs []float64) figures {
	f := figures{lat: make([]float64, len(qs)), delivery: math.NaN(), cpu: math.NaN()}
	for i := range f.lat {
		f.lat[i] = math.NaN()
	}
	if p.exp > 0 {
		f.delivery = float64(p.recv) / float64(p.exp)
	}
	if p.dels > 0 {
		f.cpu = p.cpu / p.dels * 1e6
	}
	if p.n == 0 {
		return f
	}
	j := 0
	var cum uint64
	for i, c := range p.counts {
		cum += c
		for j < len(qs) && cum >= max(uint64(math.Ceil(qs[j]*float64(p.n)-1e-9)), 1) {
			f.lat[j] = float64(p.values[i]) / 1000
			j++
		}
		if j == len(qs) {
			break
		}
	}
	return f
}

// whole pools every window of every run: the side's figures.
func (s *series) whole(p *pool, qs []float64) figures {
	p.reset()
	for _, run := range s.runs {
		for i := range run {
			p.add(&run[i])
		}
	}
	for _, run := range s.cpu {
		for _, w := range run {
			p.cpu += w.CPUSeconds
			p.dels += w.Deliveries
		}
	}
	return p.figures(qs)
}

// draw pools one bootstrap resample: as many runs as the side has, drawn
// with replacement, and within each drawn run as many windows as it has,
// drawn with replacement. Drawing runs first carries the run-to-run spread
// into the interval; drawing windows carries the spread within a run.
func (s *series) draw(r *rand.Rand, p *pool, qs []float64) figures {
	p.reset()
	if k := len(s.runs); k > 0 {
		for range k {
			run := s.runs[r.IntN(k)]
			for range len(run) {
				p.add(&run[r.IntN(len(run))])
			}
		}
	}
	if k := len(s.cpu); k > 0 {
		for range k {
			run := s.cpu[r.IntN(k)]
			for range len(run) {
				w := run[r.IntN(len(run))]
				p.cpu += w.CPUSeconds
				p.dels += w.Deliveries
			}
		}
	}
	return p.figures(qs)
}

// change is b against a in m's ChangeUnit: % for relative metrics, pp for
// the delivery ratio. It is NaN when either is, or when a is 0 for a
// relative one.
func change(m Metric, a, b float64) float64 {
	if m.ChangeUnit == "pp" {
		return (b - a) * 100
	}
	if a == 0 {
		return math.NaN()
	}
	return (b/a - 1) * 100
}

// interval returns the central conf share of the finite values of xs (which
// it sorts), and false when fewer than half of them are finite.
func interval(xs []float64, conf float64) (lo, hi float64, ok bool) {
	total := len(xs)
	finite := slices.DeleteFunc(xs, func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) })
	if len(finite) == 0 || 2*len(finite) < total {
		return 0, 0, false
	}
	slices.Sort(finite)
	tail := (1 - conf) / 2
	n := float64(len(finite) - 1)
	return finite[int(math.Floor(tail*n))], finite[int(math.Ceil((1-tail)*n))], true
}

// Verdict judges a change whose interval is [lo, hi] against margin (a
// magnitude in m's ChangeUnit): regressed when the whole interval lies
// beyond the margin on the side where m gets worse, improved when it lies
// beyond it on the other side, the same otherwise: a change within the
// noise, or one too small to matter.
func Verdict(m Metric, margin, lo, hi float64) string {
	worseLo, worseHi := lo*m.Worse, hi*m.Worse
	if worseLo > worseHi {
		worseLo, worseHi = worseHi, worseLo
	}
	switch {
	case worseLo > margin:
		return results.Regressed
	case worseHi < -margin:
		return results.Improved
	}
	return results.Same
}
