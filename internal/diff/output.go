package diff

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/scalechat/scalechat/internal/results"
)

// WriteText prints the diff: per step a row per metric with A's and B's
// figures, the change, its interval and the verdict; then the warnings and
// the verdict of the whole diff.
func WriteText(w io.Writer, d *results.Diff) error {
	fmt.Fprintf(w, "A: %s\nB: %s\n", strings.Join(d.A, " "), strings.Join(d.B, " "))
	fmt.Fprintf(w, "%.0f %% intervals of the change from %d bootstrap resamples of 1 s windows (runs, then windows within each run), seed %d\n",
		d.Confidence*100, d.Resamples, d.Seed)
	if d.Gate != "" {
		fmt.Fprintf(w, "gate: --fail-on %s\n", d.Gate)
	}
	for _, s := range d.Steps {
		fmt.Fprintf(w, "\nstep %s\n", s.Step)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "metric\tA\tB\tchange\tinterval\tthreshold\tverdict")
		for _, m := range s.Metrics {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", label(m.Metric), m.FigureText(m.A, ms), m.FigureText(m.B, ms),
				results.ChangeText(m.Change, m.ChangeUnit), intervalText(m), thresholdText(m), verdictText(m))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(d.Warnings) > 0 {
		fmt.Fprintln(w)
		for _, warn := range d.Warnings {
			fmt.Fprintf(w, "WARNING: %s\n", warn)
		}
	}
	fmt.Fprintf(w, "\nverdict: %s\n", d.Verdict)
	for _, r := range d.Reasons {
		fmt.Fprintf(w, "  %s\n", r)
	}
	return nil
}

func label(metric string) string {
	if metric == "cpu" {
		return "cpu/delivery"
	}
	return metric
}

func intervalText(m results.MetricDiff) string {
	if m.Low == nil || m.High == nil {
		return "–"
	}
	return "[" + results.ChangeText(m.Low, m.ChangeUnit) + ", " + results.ChangeText(m.High, m.ChangeUnit) + "]"
}

func thresholdText(m results.MetricDiff) string {
	var t string
	if m.ChangeUnit == "%" {
		t = fmt.Sprintf("%+g %%", m.Threshold)
	} else {
		t = fmt.Sprintf("%+g pp", m.Threshold)
	}
	if m.Threshold == 0 {
		t = "0 " + m.ChangeUnit
	}
	if m.Gated {
		t += " (gate)"
	}
	return t
}

func verdictText(m results.MetricDiff) string {
	if m.Note != "" {
		return m.Verdict + ": " + m.Note
	}
	return m.Verdict
}

// ms writes a latency of the printed table.
func ms(v float64) string { return fmt.Sprintf("%.3f ms", v) }
