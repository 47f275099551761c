package results

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummaryUnmeasuredStep: a step with no delivery has no latencies:
// summary.json holds null, summary.csv empty fields, and both read back.
func TestSummaryUnmeasuredStep(t *testing.T) {
	lat := Latency{P50: 1.5, P99: 3, Max: 4, Mean: 2}
	sum := &Summary{Steps: []StepStats{
		{Step: "ok", Sent: 10, Expected: 20, Received: 20, Latency: lat},
		{Step: "dead", Sent: 10, Expected: 20},
	}, Overall: StepStats{Step: "all", Sent: 20, Expected: 40, Received: 20, Latency: lat}}
	dir := t.TempDir()
	if err := WriteSummary(dir, sum, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	if n := strings.Count(js, `"p50_ms": null`); n != 1 || strings.Count(js, `"p50_ms": 1.5`) != 2 || strings.Count(js, `"mean_ms": null`) != 1 {
		t.Errorf("summary.json: %d null p50, want the dead step's only:\n%s", n, js)
	}
	back, err := ReadSummary(filepath.Join(dir, SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	if back.Steps[0].Latency != lat || back.Steps[1].Measured() || back.Steps[1].P50 != 0 || back.Steps[1].Sent != 10 {
		t.Errorf("read back %+v", back.Steps)
	}
	f, err := os.Open(filepath.Join(dir, SummaryCSV))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, c := range []string{"p50_ms", "p99_9_ms", "min_ms", "max_ms", "mean_ms", "stddev_ms"} {
		if ok, dead := recs[1][col[c]], recs[2][col[c]]; ok == "" || dead != "" {
			t.Errorf("summary.csv %s: measured %q, dead %q (want a value, then empty)", c, ok, dead)
		}
	}
	if recs[2][col["sent"]] != "10" {
		t.Errorf("dead step's sent = %q", recs[2][col["sent"]])
	}
}
