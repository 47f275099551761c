//go:build linux

package bench

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/scenarios"
)

func TestRepeatRefused(t *testing.T) {
	err := Run(context.Background(), []string{"cluster"}, Options{Repeat: -1, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "--repeat") {
		t.Errorf("err = %v", err)
	}
}

// TestClusterSmoke runs `scalechat bench --smoke --repeat 2 cluster` (the
// benchmark file scenarios/cluster.yaml) with a real redis-server and a
// real nats-server: every setup of every shape has its row in both runs,
// with its figures (Redis's or NATS's) or "–" where a smoke run is too
// short to measure, its targets and verdict, and the medians follow.
func TestClusterSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server, nodes and load generators for about half a minute")
	}
	needRedisServer(t)
	if _, err := exec.LookPath("nats-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nats-server is missing (CI installs it)")
		}
		t.Skip("nats-server is not installed")
	}
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
	num := `(\d+\.\d\d|–)`
	alone := regexp.MustCompile(`  ` + num + ` µs/deliv  `)
	nodes := regexp.MustCompile(`Redis ` + num + ` µs/deliv; ([\d.]+[kM]?|–) deliveries/s a Redis core; nodes vs 1 node (×\d+\.\d\d|–)`)
	onNATS := regexp.MustCompile(`NATS ` + num + ` µs/deliv; ([\d.]+[kM]?|–) deliveries/s a NATS core; nodes vs 1 node (×\d+\.\d\d|–)`)
	latency := regexp.MustCompile(`cross-node p50 (×\d+\.\d\d|n/a) vs same node`)
	judged := regexp.MustCompile(`  (met|MISSED|–)( \(generator saturated\))?\s*$`)
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
			row{sh + ": 2 nodes, rooms on A", pick("≤ ×1.1"), nodes},
			row{sh + ": 2 nodes, rooms split", pick("redis_per_delivery<=2us; ≤ ×1.3"), nodes},
			row{sh + ": 2 nodes, rooms split: same-node deliveries", "", nil},
			row{sh + ": 2 nodes, rooms split: cross-node deliveries", "", latency},
			row{sh + ": 3 nodes, rooms split", pick("redis_per_delivery<=2us; ") + "≤ ×1.15", nodes},
			row{sh + ": 3 nodes, rooms split: same-node deliveries", "", nil},
			row{sh + ": 3 nodes, rooms split: cross-node deliveries", "", latency})
		if small {
			want = append(want,
				row{sh + ": 2 nodes on NATS, rooms on A", "", onNATS},
				row{sh + ": 2 nodes on NATS, rooms split", "nats_per_delivery<=1us", onNATS},
				row{sh + ": 2 nodes on NATS, rooms split: same-node deliveries", "", nil},
				row{sh + ": 2 nodes on NATS, rooms split: cross-node deliveries", "", latency},
				row{sh + ": 3 nodes on NATS, rooms split", "", onNATS},
				row{sh + ": 3 nodes on NATS, rooms split: same-node deliveries", "", nil},
				row{sh + ": 3 nodes on NATS, rooms split: cross-node deliveries", "", latency})
		}
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
		if w.figure != nil && w.figure != latency {
			if _, l := find(w.name + ": median of 2"); l != "" && !w.figure.MatchString(l) {
				t.Errorf("median row of %q lacks its figures:\n%s", w.name, l)
			}
		}
	}
	if last1 > first2 {
		t.Errorf("the runs are not in turn: a row of run 1 (line %d) follows one of run 2 (line %d)", last1, first2)
	}
	for _, run := range []string{"run1", "run2"} {
		if m, _ := filepath.Glob(filepath.Join(dir, run, "*.meta.json")); len(m) < 23 {
			t.Errorf("%d meta files in %s, want one per generator (23)", len(m), run)
		}
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
	names := slices.DeleteFunc(redisSpecs(t), func(n string) bool { return n == "cluster" }) // TestClusterSmoke runs it
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
		setups := append([]specServers{sp.bench.Servers}, slices.Collect(maps.Values(sp.bench.Setups))...)
		if slices.ContainsFunc(setups, func(s specServers) bool { return s.Nodes > 1 || s.Redis }) {
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
