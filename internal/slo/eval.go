package slo

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
)

// Verdict is what a step's figure says about an objective.
type Verdict = results.SLOVerdict

// Verdicts, from best to worst for a CI gate.
const (
	Met          Verdict = "met"
	Inconclusive Verdict = "inconclusive" // the generator saturated, or the figure was not measured
	Missed       Verdict = "missed"
)

// Step is what a run measured in one step: its figures by metric name, in
// the units of the metric's Kind (a metric not measured is absent), and why
// its generator saturated ("" when it did not).
type Step struct {
	Name      string
	Figures   map[string]float64
	Saturated string
	// Never holds the metrics that have no value because what they time
	// never happened (a fault no client came back from), with why: any
	// objective on them is missed.
	Never map[string]string
	// Whole marks the figures of the whole run (AsRun), judged only by
	// the objectives that name RunStep.
	Whole bool
}

// Result is one objective judged on one step, as meta.json and
// summary.json record it.
type Result = results.SLOResult

// Evaluate judges every objective on the steps it applies to: an objective
// without a step on each step, one with a step on that step, one naming
// RunStep on the whole run's figures when steps hold them (inconclusive
// when the run has no such step).
func Evaluate(objs []Objective, steps []Step) []Result {
	var out []Result
	for _, o := range objs {
		found := false
		for _, s := range steps {
			if !applies(o, s) {
				continue
			}
			found = true
			out = append(out, judge(o, s))
		}
		if !found {
			name := o.Step
			if name == "" {
				name = "(none)"
			}
			out = append(out, Result{SLO: o.Text, Step: name, Metric: o.Metric, Value: "–", Verdict: Inconclusive,
				Reason: fmt.Sprintf("the run has no step %s to judge %s on", name, o.Text)})
		}
	}
	return out
}

func judge(o Objective, s Step) Result {
	r := Result{SLO: o.Text, Step: s.Name, Metric: o.Metric, Value: "–"}
	if why, never := s.Never[o.Metric]; never {
		r.Value, r.Verdict = "never", Missed
		r.Reason = fmt.Sprintf("%s = never: %s", o.Metric, why)
		return r
	}
	v, ok := s.Figures[o.Metric]
	if !ok || math.IsNaN(v) {
		r.Verdict = Inconclusive
		r.Reason = fmt.Sprintf("%s was not measured in step %s%s", o.Metric, s.Name, hint(o.Metric))
		return r
	}
	r.Measured, r.Value = &v, Format(o.Kind(), v)
	holds := o.Op.Holds(v, o.Limit)
	switch {
	case s.Saturated != "":
		r.Verdict = Inconclusive
		r.Reason = fmt.Sprintf("%s = %s, but the load generator saturated (%s): the figure is not the server's", o.Metric, r.Value, s.Saturated)
	case holds:
		r.Verdict = Met
		r.Reason = fmt.Sprintf("%s = %s, %s %s", o.Metric, r.Value, o.Op, Format(o.Kind(), o.Limit))
	default:
		r.Verdict = Missed
		r.Reason = fmt.Sprintf("%s = %s, not %s %s", o.Metric, r.Value, o.Op, Format(o.Kind(), o.Limit))
	}
	return r
}

func hint(metric string) string {
	switch metric {
	case "cpu_per_delivery":
		return " (it needs the server's CPU: --server-metrics or --server-pid)"
	case "p50", "p90", "p99", "p99.9", "max":
		return " (no message was delivered)"
	case "recovery":
		return " (no fault was injected: --drop-every, --node-kill …)"
	}
	return ""
}

// Worst returns the worst verdict of rs (Met when rs is empty).
func Worst(rs []Result) Verdict {
	w := Met
	for _, r := range rs {
		switch {
		case r.Verdict == Missed:
			return Missed
		case r.Verdict == Inconclusive:
			w = Inconclusive
		}
	}
	return w
}

// Format writes v, in the units of kind, for people: durations in the unit
// that keeps 3 significant digits readable, ratios as percentages.
func Format(kind Kind, v float64) string {
	switch kind {
	case Duration:
		switch {
		case v >= 1000:
			return trim(v/1000) + "s"
		case v >= 1:
			return trim(v) + "ms"
		case v >= 0.001:
			return trim(v*1000) + "us"
		case v == 0:
			return "0ms"
		default:
			return trim(v*1e6) + "ns"
		}
	case Ratio:
		return trim(100*v) + "%"
	case Bytes:
		if v >= 1<<20 {
			return trim(v/(1<<20)) + "MiB"
		}
		return trim(v/(1<<10)) + "KiB"
	default:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
}

// trim writes v with at most 3 decimals, without trailing zeros.
func trim(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// Bare returns r's objective without the step it names, if it names one:
// "p99<50ms" for "s2:p99<50ms", for printouts that name the step apart.
func Bare(r Result) string {
	return strings.TrimPrefix(r.SLO, r.Step+":")
}

// Print writes one line per result, "SLO s1 p99<50ms: MET (p99 = 3.1ms, <
// 50ms)" (an objective naming its step is printed without it, the step
// once), then the overall verdict; nothing when rs is empty.
func Print(w io.Writer, rs []Result) {
	if len(rs) == 0 {
		return
	}
	n := map[Verdict]int{}
	for _, r := range rs {
		n[r.Verdict]++
		fmt.Fprintf(w, "SLO %s %s: %s (%s)\n", r.Step, Bare(r), strings.ToUpper(string(r.Verdict)), r.Reason)
	}
	fmt.Fprintf(w, "SLO verdict: %s (%d met, %d missed, %d inconclusive)\n", strings.ToUpper(string(Worst(rs))), n[Met], n[Missed], n[Inconclusive])
}
