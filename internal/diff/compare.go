package diff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
)

// Run is one load-test run as a diff reads it: its steps, each cut into
// windows.
type Run struct {
	Name  string
	Steps []Step
}

// Step is one step of a run.
type Step struct {
	Name    string
	Windows []Window
	// CPU are the server's scrape intervals within the step's sending
	// window; Scraped says the run scraped a server at all.
	CPU     []CPUWindow
	Scraped bool
	// Saturated is the load generator's saturation reason, "" when it kept
	// up: latencies of a saturated step measure the generator too.
	Saturated string
}

func (s *Step) received() (n int64) {
	for _, w := range s.Windows {
		n += w.Received
	}
	return n
}

// Options tune a comparison.
type Options struct {
	// Resamples is the number of bootstrap resamples. Default 1000.
	Resamples int
	// Seed seeds the resampling, so that a diff prints the same each time.
	// Default 1.
	Seed uint64
	// Confidence is the share of resamples inside an interval. Default 0.95.
	Confidence float64
	// Gate holds the --fail-on thresholds; its metrics alone decide the
	// verdict when it is not empty.
	Gate Gate
}

func (o *Options) fillDefaults() {
	if o.Resamples <= 0 {
		o.Resamples = 1000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Confidence <= 0 || o.Confidence >= 1 {
		o.Confidence = .95
	}
}

// Compare compares side a (the baseline, one or more runs) with side b,
// step by step (matched by name).
func Compare(a, b []*Run, opts Options) *results.Diff {
	opts.fillDefaults()
	d := &results.Diff{A: runNames(a), B: runNames(b), Resamples: opts.Resamples, Seed: opts.Seed,
		Confidence: opts.Confidence, Gate: opts.Gate.String()}
	namesA, namesB := stepNames(a), stepNames(b)
	for _, name := range namesA {
		if !slices.Contains(namesB, name) {
			d.OnlyA = append(d.OnlyA, name)
			continue
		}
		sa, wa := sideSteps(a, name)
		sb, wb := sideSteps(b, name)
		d.Warnings = append(append(d.Warnings, wa...), wb...)
		d.Steps = append(d.Steps, compareStep(name, sa, sb, len(d.Steps), opts))
	}
	for _, name := range namesB {
		if !slices.Contains(namesA, name) {
			d.OnlyB = append(d.OnlyB, name)
		}
	}
	d.Warnings = append(d.Warnings, sideWarnings("A", a)...)
	d.Warnings = append(d.Warnings, sideWarnings("B", b)...)
	if len(d.OnlyA) > 0 {
		d.Warnings = append(d.Warnings, "steps only in A, not compared: "+strings.Join(d.OnlyA, ", "))
	}
	if len(d.OnlyB) > 0 {
		d.Warnings = append(d.Warnings, "steps only in B, not compared: "+strings.Join(d.OnlyB, ", "))
	}
	if len(d.Steps) == 0 {
		d.Warnings = append(d.Warnings, "no step is in both A and B: nothing was compared")
	}
	judge(d, opts.Gate)
	return d
}

// judge sets the diff's verdict from its metrics: those of the gate when
// there is one, all otherwise.
func judge(d *results.Diff, g Gate) {
	d.Verdict = results.Same
	var improved []string
	for _, s := range d.Steps {
		for _, m := range s.Metrics {
			if len(g) > 0 && !m.Gated {
				continue
			}
			why := fmt.Sprintf("%s of step %s", m.Metric, s.Step)
			if m.Change != nil && m.Low != nil {
				why += fmt.Sprintf(" %s [%s, %s]", results.ChangeText(m.Change, m.ChangeUnit),
					results.ChangeText(m.Low, m.ChangeUnit), results.ChangeText(m.High, m.ChangeUnit))
			} else if m.Note != "" {
				why += ": " + m.Note
			}
			switch m.Verdict {
			case results.Regressed:
				d.Verdict = results.Regressed
				d.Reasons = append(d.Reasons, why)
			case results.Improved:
				improved = append(improved, why)
			}
		}
	}
	if d.Verdict == results.Same && len(improved) > 0 {
		d.Verdict, d.Reasons = results.Improved, improved
	}
}

// Uncompared lists the gated metrics that could not be compared: a gate
// that cannot be checked has not passed.
func Uncompared(d *results.Diff) []string {
	var out []string
	for _, s := range d.Steps {
		for _, m := range s.Metrics {
			if m.Gated && m.Verdict == results.NotCompared {
				out = append(out, fmt.Sprintf("%s of step %s (%s)", m.Metric, s.Step, m.Note))
			}
		}
	}
	return out
}

func runNames(rs []*Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// stepNames lists the steps of a side in the order of its runs.
func stepNames(rs []*Run) []string {
	var out []string
	for _, r := range rs {
		for _, s := range r.Steps {
			if !slices.Contains(out, s.Name) {
				out = append(out, s.Name)
			}
		}
	}
	return out
}

// sideSteps returns the step name of each run of a side that has it, and a
// warning for each run that lacks it or whose generator was saturated.
func sideSteps(rs []*Run, name string) (steps []*Step, warnings []string) {
	for _, r := range rs {
		i := slices.IndexFunc(r.Steps, func(s Step) bool { return s.Name == name })
		if i < 0 {
			warnings = append(warnings, fmt.Sprintf("run %s has no step %s: that side's figures come from its other runs", r.Name, name))
			continue
		}
		if r.Steps[i].Saturated != "" {
			warnings = append(warnings, fmt.Sprintf("step %s of run %s: the load generator was saturated (%s), its latencies measure the generator too",
				name, r.Name, r.Steps[i].Saturated))
		}
		steps = append(steps, &r.Steps[i])
	}
	return steps, warnings
}

// sideWarnings says loudly when a side delivered nothing at all.
func sideWarnings(side string, rs []*Run) []string {
	var out []string
	for _, r := range rs {
		var n int64
		for i := range r.Steps {
			n += r.Steps[i].received()
		}
		if n == 0 {
			out = append(out, fmt.Sprintf("%s run %s delivered nothing in any step: its latencies are not measured", side, r.Name))
		}
	}
	return out
}

// compareStep compares one step; idx seeds its resamples.
func compareStep(name string, a, b []*Step, idx int, opts Options) results.StepDiff {
	values := valueTable(append(slices.Clone(a), b...))
	sa, sb := newSeries(a, values), newSeries(b, values)
	qs := latencyQuantiles()
	p := &pool{values: values, counts: make([]uint64, len(values))}
	fa, fb := sa.whole(p, qs), sb.whole(p, qs)
	changes := make([][]float64, len(Metrics))
	r := rand.New(rand.NewPCG(opts.Seed, uint64(idx)))
	for range opts.Resamples {
		da, db := sa.draw(r, p, qs), sb.draw(r, p, qs)
		for i, m := range Metrics {
			changes[i] = append(changes[i], change(m, pick(m, da), pick(m, db)))
		}
	}
	scrapedA, scrapedB := anyScraped(a), anyScraped(b)
	sd := results.StepDiff{Step: name}
	for i, m := range Metrics {
		if m.Name == "cpu" && !scrapedA && !scrapedB {
			if _, gated := opts.Gate[m.Name]; !gated {
				continue // neither run scraped a server: no row
			}
		}
		md := results.MetricDiff{Metric: m.Name, Unit: m.Unit, ChangeUnit: m.ChangeUnit,
			A: num(pick(m, fa)), B: num(pick(m, fb)), Threshold: signedMargin(m, m.Margin)}
		if g, ok := opts.Gate[m.Name]; ok {
			md.Threshold, md.Gated = signedMargin(m, g), true
		}
		md.Verdict, md.Note = judgeMetric(m, &md, changes[i], opts.Confidence, a, b)
		sd.Metrics = append(sd.Metrics, md)
	}
	return sd
}

// signedMargin signs a margin the way m gets worse (0 stays 0, not -0).
func signedMargin(m Metric, margin float64) float64 {
	if margin == 0 {
		return 0
	}
	return margin * m.Worse
}

// judgeMetric sets md's change and interval from the resampled changes and
// returns its verdict, with a note when it could not be compared.
func judgeMetric(m Metric, md *results.MetricDiff, changes []float64, conf float64, a, b []*Step) (string, string) {
	if md.A == nil || md.B == nil {
		note := missing(m, md, a, b)
		if m.Quantile > 0 && md.A != nil && received(b) == 0 {
			return results.Regressed, note // A delivered, B did not
		}
		return results.NotCompared, note
	}
	md.Change = num(change(m, *md.A, *md.B))
	lo, hi, ok := interval(changes, conf)
	if md.Change == nil || !ok {
		return results.NotCompared, "too few windows with figures for an interval"
	}
	md.Low, md.High = &lo, &hi
	return Verdict(m, math.Abs(md.Threshold), lo, hi), ""
}

// missing says why a side has no figure for m.
func missing(m Metric, md *results.MetricDiff, a, b []*Step) string {
	var why []string
	for _, s := range []struct {
		side  string
		fig   *float64
		steps []*Step
	}{{"A", md.A, a}, {"B", md.B, b}} {
		if s.fig != nil {
			continue
		}
		switch {
		case m.Name == "cpu" && !anyScraped(s.steps):
			why = append(why, s.side+" scraped no server metrics (loadtest --server-metrics)")
		case m.Name == "cpu":
			why = append(why, s.side+"'s server made no delivery in the step's sending window")
		case m.Name == "delivery":
			why = append(why, s.side+" owed no delivery (nothing sent)")
		default:
			why = append(why, s.side+" delivered nothing")
		}
	}
	return strings.Join(why, "; ")
}

func received(steps []*Step) (n int64) {
	for _, s := range steps {
		n += s.received()
	}
	return n
}

func anyScraped(steps []*Step) bool {
	return slices.ContainsFunc(steps, func(s *Step) bool { return s.Scraped || len(s.CPU) > 0 })
}

func latencyQuantiles() []float64 {
	var qs []float64
	for _, m := range Metrics {
		if m.Quantile > 0 {
			qs = append(qs, m.Quantile)
		}
	}
	return qs
}

// pick returns m's figure of f.
func pick(m Metric, f figures) float64 {
	switch m.Name {
	case "delivery":
		return f.delivery
	case "cpu":
		return f.cpu
	}
	return f.lat[slices.Index(latencyQuantiles(), m.Quantile)]
}

// num returns &v, or nil for NaN: figures not measured are null, not 0.
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// valueTable lists the distinct latencies of the steps' windows, sorted.
func valueTable(steps []*Step) []int64 {
	var vs []int64
	for _, s := range steps {
		for _, w := range s.Windows {
			for _, b := range w.Latency {
				vs = append(vs, b.US)
			}
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

// newSeries indexes the steps' windows into values.
func newSeries(steps []*Step, values []int64) *series {
	s := &series{}
	for _, st := range steps {
		run := make([]idxWindow, 0, len(st.Windows))
		for _, w := range st.Windows {
			iw := idxWindow{expected: w.Expected, received: w.Received}
			for _, b := range w.Latency {
				i, _ := slices.BinarySearch(values, b.US)
				iw.lat = append(iw.lat, idxCount{int32(i), b.N})
			}
			run = append(run, iw)
		}
		if len(run) > 0 {
			s.runs = append(s.runs, run)
		}
		if len(st.CPU) > 0 {
			s.cpu = append(s.cpu, st.CPU)
		}
	}
	return s
}
