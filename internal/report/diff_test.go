package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

func f(v float64) *float64 { return &v }

// The diff page shows both sides, the interval and the verdict, and "–"
// (not 0) for a figure a side did not measure.
func TestWriteDiff(t *testing.T) {
	d := &results.Diff{A: []string{"a.csv"}, B: []string{"b.csv"}, Resamples: 1000, Seed: 1, Confidence: .95,
		Gate: "delivery:-0.1pp", Verdict: results.Regressed, Reasons: []string{"delivery of step s1 -60.88 pp"},
		Warnings: []string{"steps only in B, not compared: s3"}, OnlyB: []string{"s3"},
		Steps: []results.StepDiff{
			{Step: "s1", Metrics: []results.MetricDiff{
				{Metric: "p99", Unit: "ms", ChangeUnit: "%", A: f(3.5), B: f(3.7), Change: f(5.7), Low: f(-60), High: f(100),
					Threshold: 10, Verdict: results.Same},
				{Metric: "delivery", Unit: "ratio", ChangeUnit: "pp", A: f(1), B: f(.3912), Change: f(-60.88), Low: f(-61.95),
					High: f(-59.21), Threshold: -0.1, Gated: true, Verdict: results.Regressed},
			}},
			{Step: "s2", Metrics: []results.MetricDiff{
				{Metric: "p99", Unit: "ms", ChangeUnit: "%", A: f(2), Threshold: 10, Verdict: results.Regressed, Note: "B delivered nothing"},
				{Metric: "delivery", Unit: "ratio", ChangeUnit: "pp", A: f(1), B: f(0), Change: f(-100), Low: f(-100), High: f(-100),
					Threshold: -0.1, Gated: true, Verdict: results.Regressed},
			}},
		}}
	dir := t.TempDir()
	if err := results.WriteDiff(filepath.Join(dir, results.DiffJSON), d); err != nil {
		t.Fatal(err)
	}
	back, ok, err := LoadDiff(dir)
	if err != nil || !ok {
		t.Fatalf("LoadDiff: %v %v", ok, err)
	}
	if _, err := WriteDiff(back, Options{Out: dir}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"diff.png", "diff.svg", "index.html"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	page := string(b)
	for _, want := range []string{"scalechat diff: regressed", "--fail-on delivery:-0.1pp", "[-61.95 pp, -59.21 pp]",
		"39.120 %", "<td>s2</td><td>p99</td><td>2 ms</td><td>–</td><td>–</td>", "B delivered nothing",
		"steps only in B, not compared: s3", `href="diff.json"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if _, ok, _ := LoadDiff(t.TempDir()); ok {
		t.Error("an empty folder read as a diff")
	}
}
