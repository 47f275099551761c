package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
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
