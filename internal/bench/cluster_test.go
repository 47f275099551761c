//go:build linux

package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/scenarios"
)

func TestClusterFigures(t *testing.T) {
	base := Result{CPUPerDel: 20}
	two := &clusterFig{node: 2}
	for _, tt := range []struct {
		name                    string
		fig                     clusterFig
		perDel                  float64
		base                    Result
		figure, target, verdict string
	}{
		{"rooms of 4 split, both missed", clusterFig{small: true, setup: setupSplit2, redisCPU: 220 * time.Millisecond, deliveries: 10000}, 44, base,
			"nodes ×2.20 vs 1 node; Redis 22.00 µs/deliv = 45.5k deliv/s per Redis core", "nodes ≤ ×1.3; Redis ≤ 3 µs/deliv", "MISSED (nodes, Redis)"},
		{"rooms of 4 split, met", clusterFig{small: true, setup: setupSplit2, redisCPU: 200 * time.Millisecond, deliveries: 100000}, 25, base,
			"nodes ×1.25 vs 1 node; Redis 2.00 µs/deliv = 500.0k deliv/s per Redis core", "nodes ≤ ×1.3; Redis ≤ 3 µs/deliv", "met"},
		{"rooms of 4 on A, nodes missed", clusterFig{small: true, setup: setupOnA, redisCPU: 100 * time.Millisecond, deliveries: 10000}, 24, base,
			"nodes ×1.20 vs 1 node; Redis 10.00 µs/deliv = 100.0k deliv/s per Redis core", "nodes ≤ ×1.1", "MISSED (nodes)"},
		{"rooms of 4 on A, met on a saturated generator", clusterFig{small: true, setup: setupOnA, redisCPU: 100 * time.Millisecond, deliveries: 10000, saturated: true}, 21, base,
			"nodes ×1.05 vs 1 node; Redis 10.00 µs/deliv = 100.0k deliv/s per Redis core", "nodes ≤ ×1.1", "met (generator saturated)"},
		{"rooms of 50 on 3 nodes, missed against 2", clusterFig{setup: setupSplit3, redisCPU: 100 * time.Millisecond, deliveries: 100000}, 48, base,
			"nodes ×2.40 vs 1 node (×1.20 vs 2 nodes); Redis 1.00 µs/deliv = 1.00M deliv/s per Redis core", "≤ ×1.15 of 2 nodes", "MISSED (3 nodes vs 2)"},
		{"rooms of 50 split over 2: figures, no target", clusterFig{setup: setupSplit2, redisCPU: 100 * time.Millisecond, deliveries: 100000}, 20, base,
			"nodes ×1.00 vs 1 node; Redis 1.00 µs/deliv = 1.00M deliv/s per Redis core", "", ""},
		{"smoke: the single node measured nothing, Redis one tick", clusterFig{small: true, setup: setupSplit2, redisCPU: 10 * time.Millisecond, deliveries: 80}, 250, Result{},
			"nodes n/a vs 1 node; Redis – µs/deliv", "nodes ≤ ×1.3; Redis ≤ 3 µs/deliv", "n/a"},
		{"smoke: the single node's CPU two ticks", clusterFig{small: true, setup: setupSplit2, redisCPU: time.Second, deliveries: 100000}, 25, Result{CPUNote: "CPU/delivery: – (2 …)"},
			"nodes – vs 1 node; Redis 10.00 µs/deliv = 100.0k deliv/s per Redis core", "nodes ≤ ×1.3; Redis ≤ 3 µs/deliv", "n/a"},
		{"smoke: Redis measured nothing", clusterFig{small: true, setup: setupSplit3, deliveries: 80}, 40, base,
			"nodes ×2.00 vs 1 node (×1.00 vs 2 nodes); Redis n/a µs/deliv", "≤ ×1.15 of 2 nodes; Redis ≤ 3 µs/deliv", "n/a"},
		{"one node alone", clusterFig{setup: setupAlone, deliveries: 10000}, 20, base,
			"nodes ×1 (the reference): 20.00 µs/deliv", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fig := tt.fig
			row := Result{CPUPerDel: tt.perDel, cluster: &fig}
			clusterFigures(&row, tt.base, two)
			if row.Figure != tt.figure || row.Target != tt.target || row.Verdict != tt.verdict {
				t.Errorf("got\n  %q | %q | %q\nwant\n  %q | %q | %q", row.Figure, row.Target, row.Verdict, tt.figure, tt.target, tt.verdict)
			}
		})
	}
}

func TestClusterMedians(t *testing.T) {
	run := func(node, redis, cross float64, sat bool) []Result {
		return []Result{
			{Scenario: "cluster 500×4: 2 nodes, rooms split", cluster: &clusterFig{small: true, setup: setupSplit2, node: node, nodeUS: 20 * node, redisUS: redis, saturated: sat}},
			{Scenario: "cluster 500×4: 2 nodes, rooms split: same-node deliveries"},
			{Scenario: "cluster 500×4: 2 nodes, rooms split: cross-node deliveries", cluster: &clusterFig{latency: true, crossP50: cross}},
		}
	}
	got := clusterMedians([][]Result{run(1.95, 21.5, 1.01, false), run(2.37, 22.4, 0, false), run(1.25, 2.2, 1.05, true)})
	if len(got) != 2 {
		t.Fatalf("%d median rows, want 2 (the latency row without a figure has none): %+v", len(got), got)
	}
	split, cross := got[0], got[1]
	if split.Scenario != "cluster 500×4: 2 nodes, rooms split: median of 3" ||
		!strings.HasPrefix(split.Figure, "nodes ×1.95 vs 1 node; Redis 21.50 µs/deliv") ||
		!strings.HasSuffix(split.Figure, "runs ×1.95 / 21.50 µs, ×2.37 / 22.40 µs, ×1.25 / 2.20 µs") {
		t.Errorf("split median: %q: %q", split.Scenario, split.Figure)
	}
	if split.Verdict != "MISSED (nodes, Redis) (generator saturated)" || split.CPUPerDel != 39 {
		t.Errorf("split median verdict %q, µs/deliv %v", split.Verdict, split.CPUPerDel)
	}
	// The run that measured no latency ratio is left out of its median.
	if cross.Scenario != "cluster 500×4: 2 nodes, rooms split: cross-node deliveries: median of 3" ||
		!strings.HasPrefix(cross.Figure, "cross-node p50 ×1.03 vs same node; runs ×1.01, n/a, ×1.05") {
		t.Errorf("cross median: %q: %q", cross.Scenario, cross.Figure)
	}
}

func TestRepeatRefused(t *testing.T) {
	err := Run(context.Background(), []string{"cluster"}, Options{Repeat: -1, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "--repeat") {
		t.Errorf("err = %v", err)
	}
}

// TestClusterSmoke runs `scalechat bench --smoke --repeat 2 cluster` with a
// real redis-server: every setup of every shape has its row in both runs,
// with its figures or "n/a" where a smoke run is too short to measure, its
// targets and verdict, and the medians follow.
func TestClusterSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server, nodes and load generators for about half a minute")
	}
	needRedisServer(t)
	exe := buildScalechat(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, exe, "bench", "--smoke", "--repeat", "2", "--dir", dir, "cluster")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	t.Logf("stdout:\n%s", out)
	if err != nil {
		t.Fatalf("bench --smoke --repeat 2 cluster: %v\nstderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(out, "\n")
	find := func(name string) (int, string) {
		for i, l := range lines {
			if strings.HasPrefix(l, name+"  ") {
				return i, l
			}
		}
		t.Errorf("no row %q", name)
		return -1, ""
	}
	// "–": a CPU figure of fewer than 10 clock ticks, as smoke sizes give.
	num := `(\d+\.\d\d|n/a|–)`
	alone := regexp.MustCompile(`nodes ×1 \(the reference\): ` + num + ` µs/deliv`)
	nodes := regexp.MustCompile(`nodes (×\d+\.\d\d|n/a|–) vs 1 node.*; Redis (\d+\.\d\d µs/deliv = \S+ deliv/s per Redis core|n/a µs/deliv|– µs/deliv)`)
	latency := regexp.MustCompile(`cross-node p50 (×\d+\.\d\d|n/a) vs same node`)
	judged := regexp.MustCompile(`  (met|MISSED \(.+\)|n/a)( \(generator saturated\))?\s*$`)
	type row struct {
		name, target string
		figure       *regexp.Regexp
	}
	var want []row
	for _, sh := range []string{"cluster 5×4", "cluster 2×50"} {
		small := sh == "cluster 5×4"
		pick := func(s string) string {
			if small {
				return s
			}
			return ""
		}
		want = append(want,
			row{sh + ": 1 node, no Redis", "", alone},
			row{sh + ": 2 nodes, rooms on A", pick("nodes ≤ ×1.1"), nodes},
			row{sh + ": 2 nodes, rooms split", pick("nodes ≤ ×1.3; Redis ≤ 3 µs/deliv"), nodes},
			row{sh + ": 2 nodes, rooms split: same-node deliveries", "", nil},
			row{sh + ": 2 nodes, rooms split: cross-node deliveries", "", latency},
			row{sh + ": 3 nodes, rooms split", "≤ ×1.15 of 2 nodes" + pick("; Redis ≤ 3 µs/deliv"), nodes},
			row{sh + ": 3 nodes, rooms split: same-node deliveries", "", nil},
			row{sh + ": 3 nodes, rooms split: cross-node deliveries", "", latency})
	}
	want = append(want,
		row{"cluster 8×5/10: 1 node, no Redis", "", alone},
		row{"cluster 8×5/10: 2 nodes, clients round robin", "", nodes},
		row{"cluster 8×5/10: 2 nodes, clients round robin: same-node deliveries", "", nil},
		row{"cluster 8×5/10: 2 nodes, clients round robin: cross-node deliveries", "", latency})
	last1, first2 := -1, len(lines)
	for _, w := range want {
		for _, prefix := range []string{"#1 ", "#2 "} {
			i, l := find(prefix + w.name)
			if i < 0 {
				continue
			}
			if prefix == "#1 " {
				last1 = max(last1, i)
			} else {
				first2 = min(first2, i)
			}
			if w.figure != nil && !w.figure.MatchString(l) {
				t.Errorf("row %q lacks its figures (%v):\n%s", prefix+w.name, w.figure, l)
			}
			if w.target != "" && (!strings.Contains(l, w.target) || !judged.MatchString(l)) {
				t.Errorf("row %q lacks its target %q or a verdict:\n%s", prefix+w.name, w.target, l)
			}
		}
		if w.figure != nil {
			if _, l := find(w.name + ": median of 2"); l != "" && !w.figure.MatchString(l) {
				t.Errorf("median row of %q lacks its figures:\n%s", w.name, l)
			}
		}
	}
	if last1 > first2 {
		t.Errorf("the runs are not in turn: a row of run 1 (line %d) follows one of run 2 (line %d)", last1, first2)
	}
	for _, run := range []string{"run1", "run2"} {
		if m, _ := filepath.Glob(filepath.Join(dir, run, "*.meta.json")); len(m) < 17 {
			t.Errorf("%d meta files in %s, want one per generator (17)", len(m), run)
		}
	}
}

// A run whose CPU held too few clock ticks is "–" in the list of runs and
// left out of the median; the median is "–" only when no run measured it.
func TestClusterMediansOfTooFewTicks(t *testing.T) {
	fig := func(node, redis float64) []Result {
		return []Result{{Scenario: "cluster 5×4: 2 nodes, rooms split", cluster: &clusterFig{small: true, setup: setupSplit2,
			node: node, nodeUS: 20 * node, redisUS: redis, nodeShort: node == 0, redisShort: redis == 0}}}
	}
	got := clusterMedians([][]Result{fig(0, 0), fig(1.5, 2)})
	if f := got[0].Figure; !strings.HasPrefix(f, "nodes ×1.50 vs 1 node; Redis 2.00 µs/deliv") || !strings.HasSuffix(f, "runs – / – µs, ×1.50 / 2.00 µs") {
		t.Errorf("one run of too few ticks: %q", f)
	}
	got = clusterMedians([][]Result{fig(0, 0), fig(0, 0)})
	if f := got[0].Figure; !strings.HasPrefix(f, "nodes – vs 1 node; Redis – µs/deliv") || got[0].Verdict != "n/a" {
		t.Errorf("every run of too few ticks: %q, verdict %q", f, got[0].Verdict)
	}
}

// TestRedisSpecsSmoke runs every benchmark file of scenarios/ whose
// servers include Redis at smoke size, against real redis-server: none
// may fail. Of cluster-capacity.yaml: a row per step with the Redis and
// unavailable figures, then the knee.
func TestRedisSpecsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server, nodes and load generators")
	}
	needRedisServer(t)
	names := redisSpecs(t)
	exe := buildScalechat(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jsonFile := filepath.Join(t.TempDir(), "redis.json")
	out, err := exec.CommandContext(ctx, exe, append([]string{"bench", "--smoke", "--dir", t.TempDir(), "--json", jsonFile}, names...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("bench --smoke %s: %v\n%s", names, err, out)
	}
	f, err := results.ReadBenchFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rows []results.BenchRow
	for _, r := range f.Rows {
		if r.Verdict == "error" {
			t.Errorf("%s: %s", r.Scenario, r.Note)
		}
		if strings.HasPrefix(r.Scenario, "cluster-capacity") {
			rows = append(rows, r)
		}
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Scenario)
	}
	want := []string{"cluster-capacity 5×4, 2k msg/s", "cluster-capacity 5×4, 4k msg/s", "cluster-capacity: knee"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("rows %q, want %q\n%s", got, want, out)
	}
	f.Rows = rows
	for _, r := range f.Rows[:2] {
		if r.Ratio != 1 || r.P99 <= 0 || !strings.Contains(r.Figure, "Redis ") || !strings.Contains(r.Figure, "0 unavailable") || r.Verdict != "met" {
			t.Errorf("step row %+v", r)
		}
	}
	if k := f.Rows[2]; k.PerSecond != f.Rows[1].PerSecond || k.Verdict != "measured" {
		t.Errorf("knee %+v", k)
	}
}

// redisSpecs are the benchmark files of scenarios/ whose servers include
// Redis, by name.
func redisSpecs(t *testing.T) []string {
	t.Helper()
	specs, err := shippedSpecs(scenarios.Files())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sp := range specs {
		if s := sp.bench.Servers; s.Nodes > 1 || s.Redis {
			out = append(out, sp.sc.Name)
		}
	}
	return out
}

// needRedisServer skips a test without redis-server, or fails it in CI,
// which installs it.
func needRedisServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is missing (CI installs it)")
		}
		t.Skip("redis-server is not installed")
	}
}
