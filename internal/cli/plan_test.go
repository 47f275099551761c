package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/capacity"
	"github.com/scalechat/scalechat/internal/results"
)

func runPlan(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"plan"}, args...), nil, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPlanCommand(t *testing.T) {
	code, out, stderr := runPlan(t, "--users", "1M", "--rooms-per-user", "5", "--room-size", "20", "--rate", "1/min", "--msg-size", "256")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"1,000,000 users, 5 rooms each, rooms of 20", "ANSWER: ", "Redis shard", "bandwidth out",
		"deliveries /s", "333,334", "MODEL", "ASSUMPTIONS", "commit ae7b174", "benchmarks/results/2026-11-21-bench-ae7b174.json"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanFile: the YAML form gives the same plan as the flags, and a flag
// given on the command line wins over the file.
func TestPlanFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "w.yaml")
	yaml := "users: 1M\nrooms_per_user: 5\nroom-size: 20\nrate: 1/min\nmsg_size: 256\nheadroom: 30%\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, fromFlags, _ := runPlan(t, "--users", "1M", "--rooms-per-user", "5", "--room-size", "20", "--rate", "1/min", "--headroom", "30%")
	code, fromFile, stderr := runPlan(t, file)
	if code != 0 || fromFile != fromFlags {
		t.Fatalf("exit %d (%s); the file's plan differs from the flags':\n%s\n---\n%s", code, stderr, fromFile, fromFlags)
	}
	_, overridden, _ := runPlan(t, file, "--users", "2M")
	if !strings.Contains(overridden, "2,000,000 users") {
		t.Errorf("--users did not win over the file:\n%s", overridden)
	}
}

func TestPlanRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("users: 1M\nroomsize: 20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--users is required"},
		{[]string{"--users", "many"}, `--users: "many" is not a count`},
		{[]string{"--users", "1M", "--rate", "1/day"}, `--rate: "1/day" has an unknown unit "day"`},
		{[]string{"--users", "1M", "--headroom", "100%"}, `--headroom: "100%" must lie between 0% and 99%`},
		{[]string{"--users", "10", "--room-size", "20"}, "rooms of 20 members need at least that many users, not 10"},
		{[]string{bad}, `unknown field "roomsize"`},
		{[]string{filepath.Join(dir, "none.yaml")}, "read the workload"},
		{[]string{"--users", "1k", "--from", bad}, "is not a file of scalechat bench --json"},
	} {
		code, out, stderr := runPlan(t, tc.args...)
		if code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, output %q; want %d and nothing", tc.args, code, out, exitUsage)
		}
		if !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: stderr %q, want one line saying %q", tc.args, stderr, tc.want)
		}
	}
}

// TestPlanFromBench: the costs come from a bench file's rows (medians of
// repeated rows), the figures it lacks from the committed results, and the output says
// which is which.
func TestPlanFromBench(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bench.json")
	f := results.BenchFile{Version: "scalechat test", Machine: "test CPU, 2 cores", StartedAt: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC),
		Rows: []results.BenchRow{
			{Scenario: "#1 rooms 2500×4", PerSecond: 40000, CPUPerDel: 15},
			{Scenario: "#2 rooms 2500×4", PerSecond: 40000, CPUPerDel: 17},
			{Scenario: "#3 rooms 2500×4", PerSecond: 40000, CPUPerDel: 30},
			{Scenario: "oneroom n=200", PerSecond: 40000, CPUPerDel: 6},
			{Scenario: "compression 256 B off", PerSecond: 20000, CPUPerDel: 15},
			{Scenario: "cluster 500×4: 1 node, no Redis", PerSecond: 8000, CPUPerDel: 26},
			{Scenario: "idle", Figure: "2.50 KiB/conn"},
		}}
	if err := results.WriteBenchFile(file, f); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runPlan(t, "--users", "10k", "--from", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// A figure the file lacks comes from the committed results, whatever
	// their latest value.
	lab, err := capacity.LabFigures()
	if err != nil {
		t.Fatal(err)
	}
	split := ""
	for _, fg := range lab {
		if fg.Key == capacity.KeySplitRatio {
			split = fmt.Sprintf("split_ratio        %.2f ×               not in %s", fg.Value, file)
		}
	}
	for _, want := range []string{"busy_small_rooms   17.0 µs/delivery", "idle_kib           2.50 KiB/connection",
		file + " (scalechat test, test CPU, 2 cores, 2026-11-24 12:00 UTC)", split} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
	f.Smoke = true
	if err := results.WriteBenchFile(file, f); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runPlan(t, "--users", "10k", "--from", file); code != exitUsage || !strings.Contains(stderr, "--smoke run") {
		t.Errorf("a smoke run's figures: exit %d, %q", code, stderr)
	}
}

// TestPlanFromBenchNATS: with the cluster's rows on NATS in the bench
// file, the plan sizes nats-server beside Redis and says which figure is
// which engine's; without them, it says nothing of NATS.
func TestPlanFromBenchNATS(t *testing.T) {
	base := []results.BenchRow{
		{Scenario: "rooms 2500×4", PerSecond: 40000, CPUPerDel: 17},
		{Scenario: "oneroom n=200", PerSecond: 40000, CPUPerDel: 6},
		{Scenario: "compression 256 B off", PerSecond: 20000, CPUPerDel: 15},
		{Scenario: "cluster 500×4: 1 node, no Redis", PerSecond: 8000, CPUPerDel: 26},
		{Scenario: "cluster 500×4: 2 nodes, rooms split", PerSecond: 8000, CPUPerDel: 45, RedisPerDel: 3.5, NodeRatio: 1.7},
	}
	split := results.BenchRow{Scenario: "cluster 500×4: 2 nodes on NATS, rooms split", PerSecond: 8000, CPUPerDel: 60, Engine: "nats", NATSPerDel: 6.5, NodeRatio: 2.3}
	onA := results.BenchRow{Scenario: "cluster 500×4: 2 nodes on NATS, rooms on A", PerSecond: 8000, CPUPerDel: 30, Engine: "nats", NATSPerDel: 1.5, NodeRatio: 1.15}
	dir, err := os.MkdirTemp("", "plan") // t.TempDir's name has the test's, which says NATS
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for i, tc := range []struct {
		name         string
		rows         []results.BenchRow
		want, absent []string
	}{
		{"Redis alone", base, []string{"split_redis_us     3.50 µs/delivery"}, []string{"NATS", "nats"}},
		// 1M users × 1/min = 16,667 msg/s, rooms spanning: × 4 × 6.5 µs = 0.43 cores ÷ 0.5 → 1.
		{"Redis and NATS", append(slices.Clone(base), split, onA),
			[]string{"split_redis_us     3.50 µs/delivery", "split_nats_us      6.50 µs/delivery", "owned_nats_us      1.50 µs/delivery",
				"(or, on NATS, 1 nats-server core)", "or NATS, instead of Redis", "0.43 cores of nats-server: 1 at the headroom",
				"nats-server 26 µs or 6 µs per message"}, nil},
		{"NATS split alone", append(slices.Clone(base), split),
			[]string{"split_nats_us      6.50 µs/delivery", "owned_nats_us      6.50 µs/delivery", "not measured (no row of rooms on A on NATS had it): split_nats_us taken, an upper bound"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, fmt.Sprintf("bench%d.json", i))
			f := results.BenchFile{Version: "scalechat test", Machine: "test CPU, 2 cores", StartedAt: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), Rows: tc.rows}
			if err := results.WriteBenchFile(file, f); err != nil {
				t.Fatal(err)
			}
			code, out, stderr := runPlan(t, "--users", "1M", "--rooms-per-user", "5", "--room-size", "4", "--from", file)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("the plan lacks %q:\n%s", want, out)
				}
			}
			for _, no := range tc.absent {
				if strings.Contains(out, no) {
					t.Errorf("the plan says %q:\n%s", no, out)
				}
			}
		})
	}
}
