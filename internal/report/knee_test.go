package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// TestRunPageShowsSLOs: the run page lists each SLO with its measured value
// and verdict, warns on a miss, and takes analyze's verdicts over the load
// test's.
func TestRunPageShowsSLOs(t *testing.T) {
	v := 63.2
	// An objective that names its step shows it once: in the step column.
	missed := results.SLOResult{SLO: "s2:p99<50ms", Step: "s2", Metric: "p99", Measured: &v, Value: "63.2ms", Verdict: "missed", Reason: "p99 = 63.2ms, not < 50ms"}
	met := results.SLOResult{SLO: "p99<50ms", Step: "s1", Metric: "p99", Value: "3.1ms", Verdict: "met", Reason: "p99 = 3.1ms, < 50ms"}
	tests := []struct {
		name    string
		summary *results.Summary
		want    []string
		warns   int
	}{
		{"from meta.json", &results.Summary{Steps: []results.StepStats{{Step: "s1"}}, Meta: &results.Meta{SLO: []results.SLOResult{met, missed}}},
			[]string{"<td>s2</td><td>p99&lt;50ms</td><td>63.2ms</td><td>missed</td>", "<td>s1</td><td>p99&lt;50ms</td><td>3.1ms</td><td>met</td>"}, 1},
		{"analyze's first", &results.Summary{Steps: []results.StepStats{{Step: "s1"}}, SLO: []results.SLOResult{met}, Meta: &results.Meta{SLO: []results.SLOResult{missed}}},
			[]string{"<td>3.1ms</td><td>met</td>"}, 0},
		{"none", &results.Summary{Steps: []results.StepStats{{Step: "s1"}}}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			pg := runPage(&Input{Summary: tt.summary}, nil)
			if err := runTmpl.Execute(&b, pg); err != nil {
				t.Fatal(err)
			}
			html := b.String()
			for _, w := range tt.want {
				if !strings.Contains(html, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if has := strings.Contains(html, `<table id="slo">`); has != (tt.want != nil) {
				t.Errorf("SLO table shown: %v", has)
			}
			if len(pg.Warnings) != tt.warns {
				t.Errorf("warnings %q", pg.Warnings)
			}
			for _, w := range pg.Warnings {
				if w != "SLO missed: step s2, p99<50ms: p99 = 63.2ms, not < 50ms." {
					t.Errorf("warning %q", w)
				}
			}
		})
	}
}

func TestKneePage(t *testing.T) {
	dir := t.TempDir()
	k := &results.Knee{Dimension: "rate", Unit: "msg/s per client", SLO: []string{"delivery>=99.9%"}, Start: 8, Max: 8192, Resolution: 0.1,
		Stop: "found", Knee: 20, Above: 22, LimitKind: "rate-limit", Limit: "the server's rate limit: 4 message(s) refused with rate_limited",
		Answer: "knee: 20 msg/s per client (22 missed the SLOs)"}
	for _, p := range []struct {
		load float64
		v    string
	}{{8, "met"}, {16, "met"}, {32, "missed"}, {24, "missed"}, {20, "met"}, {22, "missed"}} {
		k.Probes = append(k.Probes, results.Probe{Load: p.load, Step: "p", Verdict: p.v, Sent: 100, P50: 0.2, P99: p.load / 4, Delivery: 1})
	}
	path := filepath.Join(dir, "find.knee.json")
	if err := results.WriteKnee(path, k); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, dir} {
		in, ok, err := LoadKnee(p)
		if err != nil || !ok || in.Knee.Knee != 20 {
			t.Fatalf("LoadKnee(%s): %v %v", p, ok, err)
		}
	}
	if _, ok, _ := LoadKnee(t.TempDir()); ok {
		t.Error("a folder without a knee file is a knee search")
	}
	in, _, _ := LoadKnee(path)
	out := t.TempDir()
	charts, err := WriteKnee(in, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	checkChartFiles(t, out, charts)
	svg, _ := os.ReadFile(filepath.Join(out, "knee_latency.svg"))
	if !strings.Contains(string(svg), "knee: 20 msg/s per client") {
		t.Error("the latency chart does not mark the knee")
	}
	html, _ := os.ReadFile(filepath.Join(out, "index.html"))
	for _, w := range []string{"knee: 20 msg/s per client (22 missed the SLOs)", "rate-limit: the server&#39;s rate limit", `<table id="probes">`, "delivery&gt;=99.9%"} {
		if !strings.Contains(string(html), w) {
			t.Errorf("page lacks %q", w)
		}
	}
}
