// A diff of two runs (`scalechat diff A B --json FILE` or `--out DIR`):
// diff.json holds, per step and metric, both sides' figures, the change, its
// confidence interval and the verdict; `scalechat report` draws it.

package results

import (
	"encoding/json"
	"fmt"
	"os"
)

// DiffJSON is the file name of a diff in its --out folder.
const DiffJSON = "diff.json"

// Verdicts of a metric, a step or a whole diff.
const (
	Regressed = "regressed"
	Improved  = "improved"
	Same      = "same"
	// NotCompared is a metric one side did not measure (no delivery, no
	// server metrics).
	NotCompared = "not compared"
)

// Diff is diff.json: run A (the baseline) against run B.
type Diff struct {
	A []string `json:"a"` // the runs of each side, as given
	B []string `json:"b"`
	// Resamples, Seed and Confidence say how the intervals were drawn.
	Resamples  int     `json:"resamples"`
	Seed       uint64  `json:"seed"`
	Confidence float64 `json:"confidence"`
	// Gate is the --fail-on text; "" when the diff gates nothing.
	Gate  string     `json:"gate,omitempty"`
	Steps []StepDiff `json:"steps"`
	// OnlyA and OnlyB are the steps found on one side only.
	OnlyA    []string `json:"only_a,omitempty"`
	OnlyB    []string `json:"only_b,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	Verdict  string   `json:"verdict"`
	// Reasons name what made the verdict: "p99 of step s1 +23.0 % [+15.1, +31.7]".
	Reasons []string `json:"reasons,omitempty"`
}

// StepDiff is one step present on both sides.
type StepDiff struct {
	Step    string       `json:"step"`
	Metrics []MetricDiff `json:"metrics"`
}

// MetricDiff is one metric of one step. Figures a side did not measure are
// null, never 0.
type MetricDiff struct {
	Metric string `json:"metric"` // p50, p90, p99, p99.9, delivery, cpu
	// Unit is the unit of A and B: ms, ratio (0…1) or µs.
	Unit string   `json:"unit"`
	A    *float64 `json:"a"`
	B    *float64 `json:"b"`
	// Change is B against A in ChangeUnit: % (relative) or pp
	// (percentage points); Low and High bound its interval.
	ChangeUnit string   `json:"change_unit"`
	Change     *float64 `json:"change"`
	Low        *float64 `json:"low"`
	High       *float64 `json:"high"`
	// Threshold is the margin of the verdict in ChangeUnit, signed the way
	// the metric gets worse; Gated says it came from --fail-on.
	Threshold float64 `json:"threshold"`
	Gated     bool    `json:"gated"`
	Verdict   string  `json:"verdict"`
	Note      string  `json:"note,omitempty"`
}

// WriteDiff writes d as JSON to path, creating its folder.
func WriteDiff(path string, d *Diff) error { return writeJSON(path, d) }

// ReadDiff reads a diff.json written by WriteDiff.
func ReadDiff(path string) (*Diff, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Diff
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Verdict == "" {
		return nil, fmt.Errorf("%s: not a diff (no verdict)", path)
	}
	return &d, nil
}

// FigureText writes a side's figure (A or B) in m's unit, "–" when that side
// did not measure it (not 0); ms writes milliseconds.
func (m MetricDiff) FigureText(v *float64, ms func(float64) string) string {
	if v == nil {
		return "–"
	}
	switch m.Unit {
	case "ratio":
		return fmt.Sprintf("%.3f %%", *v*100)
	case "µs":
		return fmt.Sprintf("%.2f µs", *v)
	}
	return ms(*v)
}

// ChangeText writes a change, or an end of its interval, in unit ("pp":
// percentage points, else %), signed; "–" when there is none.
func ChangeText(v *float64, unit string) string {
	if v == nil {
		return "–"
	}
	if unit == "pp" {
		return fmt.Sprintf("%+.2f pp", *v)
	}
	return fmt.Sprintf("%+.1f %%", *v)
}
