//go:build linux

package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
)

const clusterSpec = "name: t\nslo: [\"b:redis_per_delivery<=3us\"]\nsteps:\n  - {name: a, bench: {row: A, figure: [cpu_per_delivery]}}\n  - {name: b, bench: {row: B, servers: c, nodes: 2}}\n" +
	"bench: {figure: [redis_per_delivery], setups: {c: {nodes: 3}}, figures: [{name: nodes vs 1 node, on: b, ratio: [b, a], of: cpu_per_delivery, max: 1.3, as: node_cpu_vs_one_node}, {name: X, ratio: [b, a], of: cpu_per_delivery}]}\n"

// A figure on a step's row joins its figure, target and verdict, and as:
// puts its ratio in the results file's field (scalechat plan reads it);
// the others are rows of their own.
func TestApplyFigures(t *testing.T) {
	sp := mustSpec(t, clusterSpec)
	done := []specStep{
		{step: loadtest.Step{Name: "a"}, figures: map[string]float64{"cpu_per_delivery": 0.010}},
		{step: loadtest.Step{Name: "b"}, figures: map[string]float64{"cpu_per_delivery": 0.012}},
	}
	rows := []Result{
		{Scenario: "A", Figure: "10.00 µs/deliv"},
		{Scenario: "B", Figure: "Redis 2.00 µs/deliv", Target: "redis_per_delivery<=3us", Verdict: "met", cluster: &clusterFig{storeUS: 2}},
		{Scenario: "B: same-node deliveries"},
	}
	own := sp.applyFigures(done, rows, []int{0, 1})
	b := rows[1]
	if b.Figure != "Redis 2.00 µs/deliv; nodes vs 1 node ×1.20" || b.Target != "redis_per_delivery<=3us; ≤ ×1.3" || b.Verdict != "met" {
		t.Errorf("row B: %q | %q | %q", b.Figure, b.Target, b.Verdict)
	}
	if len(own) != 1 || own[0].Scenario != "X" || own[0].Figure != "CPU ×1.20" {
		t.Errorf("own rows %+v", own)
	}
	f := benchFile(rows, time.Now(), "scalechat bench t.yaml", "", false, false)
	if got := f.Rows[1]; got.NodeRatio != 1.2 || got.RedisPerDel != 2 {
		t.Errorf("results file row: node_cpu_vs_one_node %v, redis_us_per_delivery %v", got.NodeRatio, got.RedisPerDel)
	}
}

// With --repeat, a benchmark file adds a row per step of the medians of
// its figures over the runs (those that measured each), judged as one run
// is, and its figures: rows of those medians.
func TestSpecMedians(t *testing.T) {
	sp := mustSpec(t, clusterSpec)
	run := func(a, b, redis float64, sat bool) []Result {
		return []Result{
			{Scenario: "A", Figure: "run A", step: "a", figs: map[string]float64{"cpu_per_delivery": a}},
			{Scenario: "B", Figure: "run B", step: "b", Saturated: sat, figs: map[string]float64{"cpu_per_delivery": b, "redis_per_delivery": redis}},
			{Scenario: "B: cross-node deliveries"}, // not a step's row: no median
			{Scenario: "X"},
		}
	}
	got := sp.medians([][]Result{run(0.010, 0.013, 0.002, false), run(0.020, 0.030, 0, false), run(0.012, 0.015, 0.004, true)})
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(got), got)
	}
	a, b, x := got[0], got[1], got[2]
	if a.Scenario != "A: median of 3" || a.CPUPerDel != 12 || a.Figure != "12.00 µs/deliv" || !strings.Contains(a.Note, "runs: run A | run A | run A") {
		t.Errorf("A: %+v", a)
	}
	// Redis: the run that measured nothing is left out, (2+4)/2 µs.
	if b.Scenario != "B: median of 3" || b.Figure != "Redis 3.00 µs/deliv; nodes vs 1 node ×1.25" || b.Verdict != "met (generator saturated)" || !b.Saturated {
		t.Errorf("B: %+v", b)
	}
	if x.Scenario != "X: median of 3" || x.Figure != "CPU ×1.25" {
		t.Errorf("X: %+v", x)
	}
}
