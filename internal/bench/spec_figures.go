//go:build linux

package bench

import (
	"fmt"
	"slices"
	"strings"
)

// figureRow is a figures: row: its metrics of one side over the other's
// (ratio:) or less the other's (diff:), each side the mean of its steps'
// figures, "label –" for a metric a side did not measure; "n/a" when none
// was.
func figureRow(f specFigure, done []specStep) Result {
	row := Result{Scenario: f.Name, Ratio: -1, Note: f.Note}
	sides := f.sides()
	if f.Max > 0 {
		row.Target = fmt.Sprintf("≤ ×%g", f.Max)
	}
	var parts, missing []string
	met := true
	for _, m := range f.Of {
		label := metricLabel(m)
		if f.On != "" && len(f.Of) == 1 {
			label = f.Name // on a step's row, the figure names itself
		}
		a, b := sideMean(done, sides[0], m), sideMean(done, sides[1], m)
		switch {
		case a <= 0 || b <= 0:
			parts, missing = append(parts, label+" –"), append(missing, m)
		case f.Diff[0] != nil:
			parts = append(parts, difference(m, a, b))
		default:
			parts = append(parts, fmt.Sprintf("%s ×%.2f", label, a/b))
			met = met && (f.Max <= 0 || a/b <= f.Max)
		}
	}
	if len(missing) > 0 {
		addNote(&row, fmt.Sprintf("%s not measured in step %s or %s", strings.Join(missing, ", "), strings.Join(sides[0], "+"), strings.Join(sides[1], "+")))
	}
	switch {
	case len(missing) == len(f.Of) && f.On != "":
		row.Figure, row.Verdict = strings.Join(parts, ", "), "n/a" // on a row, the figure names itself
		return row
	case len(missing) == len(f.Of):
		row.Figure, row.Verdict = "–", "n/a"
		return row
	case f.Max > 0 && len(missing) > 0 && met:
		row.Verdict = "n/a"
	case f.Max > 0:
		row.Verdict = verdict(met, false)
	}
	row.Figure = strings.Join(parts, ", ")
	return row
}

// sideRatio is a one-metric ratio figure's value: 0 when not measured.
func sideRatio(done []specStep, f specFigure) float64 {
	sides := f.sides()
	a, b := sideMean(done, sides[0], f.Of[0]), sideMean(done, sides[1], f.Of[0])
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// sideMean is the mean of metric m over the steps of a side that
// measured it; 0 when none did.
func sideMean(done []specStep, side nameList, m string) float64 {
	var sum float64
	n := 0
	for _, s := range done {
		if v := s.figures[m]; v > 0 && slices.Contains(side, s.step.Name) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// difference says a - b in metric m's unit and as a share of b: what
// turning a feature on costs.
func difference(m string, a, b float64) string {
	pct := 100 * (a - b) / b
	switch m {
	case "cpu_per_delivery": // kept in ms, as slo keeps times
		return fmt.Sprintf("%+.2f µs/deliv (%+.0f%%) server CPU", 1000*(a-b), pct)
	case "generator_per_message":
		return fmt.Sprintf("%+.2f µs/msg (%+.0f%%) generator CPU", a-b, pct)
	}
	return fmt.Sprintf("%s %+.3g (%+.0f%%)", metricLabel(m), a-b, pct)
}

// metricLabel is how a figures: row names a metric.
func metricLabel(m string) string {
	switch m {
	case "cpu_per_delivery":
		return "CPU"
	case "bytes_per_delivery":
		return "bytes"
	case "deliveries_per_s":
		return "deliveries/s"
	}
	return strings.ReplaceAll(m, "_", " ")
}
