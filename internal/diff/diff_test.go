package diff

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// synth makes a run of one step "s": windows of n deliveries each, whose
// latencies (µs) are drawn from gen, with lost deliveries lost per window.
func synth(name string, windows, n int, lost int64, gen func() int64) *Run {
	st := Step{Name: "s"}
	for range windows {
		counts := map[int64]uint64{}
		for range n {
			counts[gen()]++
		}
		w := Window{Expected: int64(n) + lost, Received: int64(n)}
		for us := int64(0); len(counts) > 0; us++ {
			if c, ok := counts[us]; ok {
				w.Latency = append(w.Latency, Bucket{us, c})
				delete(counts, us)
			}
		}
		st.Windows = append(st.Windows, w)
	}
	return &Run{Name: name, Steps: []Step{st}}
}

// lognormal returns latencies around median µs with a heavy-ish tail.
func lognormal(r *rand.Rand, median float64) func() int64 {
	return func() int64 { return int64(median * math.Exp(0.5*r.NormFloat64())) }
}

func metric(t *testing.T, d *results.Diff, name string) results.MetricDiff {
	t.Helper()
	for _, m := range d.Steps[0].Metrics {
		if m.Metric == name {
			return m
		}
	}
	t.Fatalf("no metric %s in %+v", name, d.Steps[0].Metrics)
	return results.MetricDiff{}
}

func TestCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	base := synth("a", 20, 500, 0, lognormal(r, 1000))
	tests := []struct {
		name    string
		b       *Run
		gate    string
		verdict string
		check   func(t *testing.T, d *results.Diff)
	}{
		{name: "identical samples", b: base, verdict: results.Same, check: func(t *testing.T, d *results.Diff) {
			for _, m := range d.Steps[0].Metrics {
				if *m.Change != 0 || m.Verdict != results.Same {
					t.Errorf("%s: change %v verdict %s, want 0 and same", m.Metric, *m.Change, m.Verdict)
				}
			}
			if m := metric(t, d, "delivery"); *m.Low != 0 || *m.High != 0 {
				t.Errorf("delivery interval [%v, %v], want [0, 0]", *m.Low, *m.High)
			}
		}},
		{name: "a rerun from the same distribution", b: synth("b", 20, 500, 0, lognormal(r, 1000)), verdict: results.Same,
			check: func(t *testing.T, d *results.Diff) {
				if m := metric(t, d, "p50"); *m.Low > 0 || *m.High < 0 {
					t.Errorf("p50 interval [%v, %v] excludes 0", *m.Low, *m.High)
				}
			}},
		{name: "latency 30 % higher", b: synth("b", 20, 500, 0, lognormal(r, 1300)), verdict: results.Regressed,
			check: func(t *testing.T, d *results.Diff) {
				m := metric(t, d, "p50")
				if *m.Low > 30 || *m.High < 30 || *m.Low < 20 || m.Verdict != results.Regressed {
					t.Errorf("p50 change %v [%v, %v] %s, want about +30 %% regressed", *m.Change, *m.Low, *m.High, m.Verdict)
				}
			}},
		{name: "latency 30 % lower", b: synth("b", 20, 500, 0, lognormal(r, 700)), verdict: results.Improved},
		{name: "latency 30 % higher within a 50 % gate", b: synth("b", 20, 500, 0, lognormal(r, 1300)),
			gate: "p50:+50%", verdict: results.Same},
		{name: "loss of 1 in 100", b: synth("b", 20, 500, 5, lognormal(r, 1000)), gate: "delivery:-0.5pp",
			verdict: results.Regressed, check: func(t *testing.T, d *results.Diff) {
				m := metric(t, d, "delivery")
				if math.Abs(*m.Change+100*5.0/505) > 1e-9 || !m.Gated {
					t.Errorf("delivery change %v gated %v, want %v pp gated", *m.Change, m.Gated, -100*5.0/505)
				}
			}},
		{name: "loss within a 2 pp gate", b: synth("b", 20, 500, 5, lognormal(r, 1000)), gate: "delivery:-2pp",
			verdict: results.Same},
		{name: "B delivered nothing", b: synth("b", 5, 0, 10, nil), verdict: results.Regressed,
			check: func(t *testing.T, d *results.Diff) {
				m := metric(t, d, "p99")
				if m.B != nil || m.Verdict != results.Regressed || !strings.Contains(m.Note, "B delivered nothing") {
					t.Errorf("p99: B %v verdict %s note %q", m.B, m.Verdict, m.Note)
				}
				if !strings.Contains(strings.Join(d.Warnings, "\n"), "delivered nothing in any step") {
					t.Errorf("no loud warning: %q", d.Warnings)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseGate(tt.gate)
			if err != nil {
				t.Fatal(err)
			}
			d := Compare([]*Run{base}, []*Run{tt.b}, Options{Gate: g})
			if d.Verdict != tt.verdict {
				t.Errorf("verdict %s (%q), want %s", d.Verdict, d.Reasons, tt.verdict)
			}
			if tt.check != nil {
				tt.check(t, d)
			}
			again := Compare([]*Run{base}, []*Run{tt.b}, Options{Gate: g})
			if h0, h1 := d.Steps[0].Metrics[2].High, again.Steps[0].Metrics[2].High; h0 != nil && *h0 != *h1 {
				t.Error("the same diff twice gave two intervals: the seed is not fixed")
			}
		})
	}
}

// Runs whose levels differ from run to run widen the interval, against the
// same windows with no difference between runs.
func TestRunToRunSpreadWidensTheInterval(t *testing.T) {
	width := func(levels []float64) float64 {
		r := rand.New(rand.NewPCG(3, 4))
		side := func() []*Run {
			var runs []*Run
			for _, l := range levels {
				runs = append(runs, synth("r", 10, 300, 0, lognormal(r, l)))
			}
			return runs
		}
		d := Compare(side(), side(), Options{})
		m := metric(t, d, "p50")
		return *m.High - *m.Low
	}
	steady, spread := width([]float64{1000, 1000, 1000}), width([]float64{700, 1000, 1400})
	if spread < 2*steady {
		t.Errorf("interval width with run-to-run spread %.1f %%, without %.1f %%: want at least twice as wide", spread, steady)
	}
}

func TestStepsOnOneSideAreListed(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	a := synth("a", 5, 100, 0, lognormal(r, 1000))
	b := synth("b", 5, 100, 0, lognormal(r, 1000))
	a.Steps = append(a.Steps, Step{Name: "only-a", Windows: a.Steps[0].Windows})
	b.Steps = append(b.Steps, Step{Name: "only-b", Windows: b.Steps[0].Windows})
	d := Compare([]*Run{a}, []*Run{b}, Options{})
	if len(d.Steps) != 1 || len(d.OnlyA) != 1 || d.OnlyA[0] != "only-a" || len(d.OnlyB) != 1 || d.OnlyB[0] != "only-b" {
		t.Fatalf("steps %d, only A %q, only B %q", len(d.Steps), d.OnlyA, d.OnlyB)
	}
	w := strings.Join(d.Warnings, "\n")
	if !strings.Contains(w, "steps only in A, not compared: only-a") || !strings.Contains(w, "steps only in B, not compared: only-b") {
		t.Errorf("warnings %q", d.Warnings)
	}
}

func TestCPUPerDelivery(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	a := synth("a", 5, 100, 0, lognormal(r, 1000))
	b := synth("b", 5, 100, 0, lognormal(r, 1000))
	for i := range 10 {
		jitter := 1 + 0.02*float64(i%3)
		a.Steps[0].CPU = append(a.Steps[0].CPU, CPUWindow{CPUSeconds: 0.005 * jitter, Deliveries: 1000})
		b.Steps[0].CPU = append(b.Steps[0].CPU, CPUWindow{CPUSeconds: 0.010 * jitter, Deliveries: 1000})
	}
	d := Compare([]*Run{a}, []*Run{b}, Options{})
	m := metric(t, d, "cpu")
	if math.Abs(*m.A-5.1) > 0.1 || math.Abs(*m.Change-100) > 1e-6 || m.Verdict != results.Regressed {
		t.Errorf("cpu A %v µs, change %v %%, verdict %s: want about 5.1 µs, +100 %%, regressed", *m.A, *m.Change, m.Verdict)
	}
	// Without server metrics on either side there is no cpu row; gated,
	// it cannot be compared, and the gate says so.
	a.Steps[0].CPU, b.Steps[0].CPU = nil, nil
	if d := Compare([]*Run{a}, []*Run{b}, Options{}); len(d.Steps[0].Metrics) != 5 {
		t.Errorf("%d metrics without server metrics, want 5 (no cpu)", len(d.Steps[0].Metrics))
	}
	d = Compare([]*Run{a}, []*Run{b}, Options{Gate: Gate{"cpu": 10}})
	if u := Uncompared(d); len(u) != 1 || !strings.Contains(u[0], "A scraped no server metrics") {
		t.Errorf("uncompared %q", u)
	}
}

func TestVerdict(t *testing.T) {
	lat, del := Metrics[2], Metrics[4]
	tests := []struct {
		m              Metric
		margin, lo, hi float64
		want           string
	}{
		{lat, 10, 11, 30, results.Regressed},
		{lat, 10, 10, 30, results.Same}, // touching the threshold is not beyond it
		{lat, 10, -5, 30, results.Same},
		{lat, 10, -30, -11, results.Improved},
		{lat, 0, 0.1, 2, results.Regressed},
		{lat, 0, 0, 0, results.Same},
		{del, 0.1, -2, -0.2, results.Regressed},
		{del, 0.1, -2, -0.1, results.Same},
		{del, 0, 0.5, 1, results.Improved},
		{del, 0, 0, 0, results.Same},
	}
	for _, tt := range tests {
		if got := Verdict(tt.m, tt.margin, tt.lo, tt.hi); got != tt.want {
			t.Errorf("%s margin %v [%v, %v] = %s, want %s", tt.m.Name, tt.margin, tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestParseGate(t *testing.T) {
	good := []struct {
		in   string
		want Gate
		back string
	}{
		{"", Gate{}, ""},
		{"p99:+10%", Gate{"p99": 10}, "p99:+10%"},
		{" p99 : +10% , delivery:-0.1pp", Gate{"p99": 10, "delivery": 0.1}, "p99:+10%,delivery:-0.1pp"},
		{"p99.9:25%,cpu:+5%,delivery:0pp,p50:+0%", Gate{"p99.9": 25, "cpu": 5, "delivery": 0, "p50": 0},
			"p50:+0%,p99.9:+25%,delivery:-0pp,cpu:+5%"},
	}
	for _, tt := range good {
		g, err := ParseGate(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if len(g) != len(tt.want) || g.String() != tt.back {
			t.Errorf("%q = %v (%q), want %v (%q)", tt.in, g, g.String(), tt.want, tt.back)
		}
		for k, v := range tt.want {
			if g[k] != v {
				t.Errorf("%q: %s = %v, want %v", tt.in, k, g[k], v)
			}
		}
	}
	bad := []struct{ in, want string }{
		{"p99:+10%,", `--fail-on has an empty entry (write metric:threshold, e.g. p99:+10%)`},
		{"p99+10%", `--fail-on entry "p99+10%" has no colon (write metric:threshold, e.g. p99:+10%)`},
		{"p95:+10%", `--fail-on entry "p95:+10%" names an unknown metric (known: p50, p90, p99, p99.9, delivery, cpu)`},
		{"p99:+10pp", `--fail-on entry "p99:+10pp": p99 takes a threshold in %, e.g. p99:+10%`},
		{"delivery:-1%", `--fail-on entry "delivery:-1%": delivery takes a threshold in pp, e.g. delivery:-0.1pp`},
		{"p99:+ten%", `--fail-on entry "p99:+ten%": "ten" is not a number, e.g. p99:+10%`},
		{"p99:+inf%", `--fail-on entry "p99:+inf%": "inf" is not a number, e.g. p99:+10%`},
		{"p99:+-5%", `--fail-on entry "p99:+-5%": "-5" is not a number, e.g. p99:+10%`},
		{"p99:-10%", `--fail-on entry "p99:-10%": p99 gets worse upwards, so its threshold is signed that way, e.g. p99:+10%`},
		{"delivery:+0.1pp", `--fail-on entry "delivery:+0.1pp": delivery gets worse downwards, so its threshold is signed that way, e.g. delivery:-0.1pp`},
		{"p99:+10%,p99:+20%", `--fail-on names p99 twice`},
	}
	for _, tt := range bad {
		_, err := ParseGate(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: error %v, want %q", tt.in, err, tt.want)
		}
	}
}
