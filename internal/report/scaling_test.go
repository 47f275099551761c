package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// TestScalingPage: a bench results file with the scaling scenario's rows
// gives a curve per server size, latency and CPU per delivery against
// throughput, and the table of steps; other files are not scaling runs.
func TestScalingPage(t *testing.T) {
	dir := t.TempDir()
	f := results.BenchFile{Version: "test", Date: "2026-11-26", Command: "scalechat bench --json s.json scaling",
		Host: results.Host{Model: "Test CPU", Cores: 16}, Pinned: true, ServerCPUs: "0-7", GeneratorCPUs: "8-15"}
	for _, s := range []struct {
		loops          int
		rate, p50, p99 float64
		us             float64
	}{{1, 20000, 0.3, 2, 9}, {1, 10000, 0.2, 1, 10.5}, {1, 40000, 40, 144, 1.75}, {2, 20000, 0.2, 1, 11}, {2, 40000, 0.4, 3, 8}} {
		f.Rows = append(f.Rows, results.BenchRow{Scenario: "step", Loops: s.loops, PerSecond: s.rate, Ratio: 1, P50: s.p50, P99: s.p99, CPUPerDel: s.us, Figure: "generator 0.50 cores"})
	}
	f.Rows = append(f.Rows, results.BenchRow{Scenario: "scaling 1 loop: knee", PerSecond: 20000, Ratio: -1})
	path := filepath.Join(dir, "s.json")
	if err := results.WriteBenchFile(path, f); err != nil {
		t.Fatal(err)
	}
	in, ok, err := LoadScaling(path)
	if err != nil || !ok {
		t.Fatalf("LoadScaling: %v %v", ok, err)
	}
	if len(in.Loops) != 2 || len(in.Steps[1]) != 3 || in.Steps[1][0].PerSecond != 10000 || in.Steps[1][2].PerSecond != 40000 {
		t.Fatalf("loops %v, steps of 1 loop %+v: want 1 and 2, three steps by load", in.Loops, in.Steps[1])
	}
	other := filepath.Join(dir, "rooms.json")
	if err := results.WriteBenchFile(other, results.BenchFile{Rows: []results.BenchRow{{Scenario: "rooms 2500×4", PerSecond: 40000}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{other, dir, filepath.Join(dir, "none.json")} {
		if _, ok, _ := LoadScaling(p); ok {
			t.Errorf("%s is not a scaling run", p)
		}
	}
	out := t.TempDir()
	charts, err := WriteScaling(in, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	checkChartFiles(t, out, charts)
	svg, _ := os.ReadFile(filepath.Join(out, "scaling_latency.svg"))
	if !strings.Contains(string(svg), "2 loops") || !strings.Contains(string(svg), "1 loop") {
		t.Error("the latency chart has no legend per server size")
	}
	html, _ := os.ReadFile(filepath.Join(out, "index.html"))
	for _, w := range []string{"Test CPU, 16 cores", "server on CPU 0-7, generator on CPU 8-15", `<table id="steps">`, "generator 0.50 cores"} {
		if !strings.Contains(string(html), w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

// checkChartFiles fails unless every chart was drawn as a PNG and an SVG
// file in dir.
func checkChartFiles(t *testing.T, dir string, charts []Chart) {
	t.Helper()
	for _, c := range charts {
		for _, ext := range []string{".png", ".svg"} {
			if st, err := os.Stat(filepath.Join(dir, c.Name+ext)); err != nil || st.Size() == 0 {
				t.Errorf("%s%s: %v", c.Name, ext, err)
			}
		}
	}
}
