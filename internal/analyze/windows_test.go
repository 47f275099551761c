package analyze

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The windows of the golden run add up to its steps; with a 1 ms interval
// the messages of s1 fall into windows by their due time.
func TestWindowsAddUpToSteps(t *testing.T) {
	p := writeFile(t, t.TempDir(), "run.csv", goldenRun)
	for _, parsers := range []int{1, 3} {
		res := runFiles(t, Options{Workers: parsers, Windows: true, Interval: time.Millisecond}, p)
		if runFiles(t, Options{Workers: parsers}, p).Windows != nil {
			t.Fatal("windows kept without Options.Windows")
		}
		for _, s := range res.Steps {
			var exp, recv int64
			var n uint64
			for _, w := range res.Windows {
				if w.Step == s.Step {
					exp, recv, n = exp+w.Expected, recv+w.Received, n+w.Latency.Count()
				}
			}
			// s1's delivery to client 8 is received but not owed: windows
			// count every delivery, as the step does.
			if exp != s.Expected || recv != s.Received || int64(n) != s.Received {
				t.Errorf("parsers %d, %s: windows expected %d received %d latencies %d, step %d %d",
					parsers, s.Step, exp, recv, n, s.Expected, s.Received)
			}
		}
		// s1: (1,1) due +1000 in window +1 ms, (5,1) due +1500 also,
		// (1,2) due +2000 in window +2 ms.
		var got []int64
		for _, w := range res.Windows {
			if w.Step == "s1" {
				got = append(got, w.Expected)
			}
		}
		if len(got) != 2 || got[0] != 5 || got[1] != 5 {
			t.Errorf("parsers %d: s1 windows expected %v, want [5 5]", parsers, got)
		}
	}
}

// WindowHist's quantiles are the nearest rank's value within 0.8 %, exact
// below 256 µs.
func TestWindowHistQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		gen  func() int64
	}{
		{"small exact", func() int64 { return r.Int64N(256) }},
		{"milliseconds", func() int64 { return 200 + r.Int64N(20_000) }},
		{"heavy tail", func() int64 { return int64(100 * (1 + r.ExpFloat64()*r.ExpFloat64()*50)) }},
	}
	qs := []float64{.5, .9, .99, .999}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h, a, b WindowHist
			vals := make([]int64, 10_000)
			for i := range vals {
				vals[i] = tt.gen()
				h.Record(vals[i])
				if i%2 == 0 {
					a.Record(vals[i])
				} else {
					b.Record(vals[i])
				}
			}
			a.Add(&b)
			sorted := append([]int64(nil), vals...)
			slices.Sort(sorted)
			got, merged := h.Quantiles(qs), a.Quantiles(qs)
			for i, q := range qs {
				exact := sorted[rank(q, uint64(len(sorted)))-1]
				tol := float64(exact) / 128
				if exact < 256 {
					tol = 0
				}
				if d := float64(got[i] - exact); d < 0 || d > tol {
					t.Errorf("q %v = %d, exact %d (tolerance %.1f)", q, got[i], exact, tol)
				}
				if merged[i] != got[i] {
					t.Errorf("q %v of merged halves = %d, want %d", q, merged[i], got[i])
				}
			}
		})
	}
}
