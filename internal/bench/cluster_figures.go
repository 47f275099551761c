//go:build linux

package bench

import (
	"fmt"
	"strings"
	"time"
)

// The cluster scenario's figures: per row, node CPU per delivery against
// one node alone with the same traffic, Redis CPU per delivery and what
// that implies for one Redis core, the targets beside, and with
// --repeat the medians over the runs.

// clusterFig is what a cluster row measured, kept on the row for the
// medians of --repeat. A figure of 0 was not measured (too short a run).
type clusterFig struct {
	small bool // rooms of 4: the targets apply
	setup clusterSetup
	// Raw measures over the sending window.
	redisCPU   time.Duration
	deliveries int64
	saturated  bool
	// Figures.
	nodeUS  float64 // µs of node CPU per delivery
	node    float64 // nodeUS ÷ one node alone's
	redisUS float64 // µs of Redis CPU per delivery
	vsTwo   float64 // 3 nodes: node ÷ the 2-node split's node
	// The node's (or the one node alone's) and Redis's CPU held too few
	// clock ticks to be read to 10 %: their figures are "–".
	nodeShort, redisShort bool
	// Latency rows only: cross-node p50 ÷ same-node p50.
	latency  bool
	crossP50 float64
}

// mergedRow is a setup's row from its generators (one per node it used)
// and the processes that carried the traffic, over the sending window of
// all generators together.
func mergedRow(name string, gens []*genRun, counted []*proc, redis *proc, dur time.Duration) Result {
	if len(gens) == 1 {
		row := trafficRow(name, gens[0], counted...)
		s := gens[0].step()
		row.cluster = &clusterFig{deliveries: s.ReceivedAll, saturated: s.Saturated}
		if redis != nil && !s.SendStartedAt.IsZero() {
			row.cluster.redisCPU = redis.cpuBetween(s.SendStartedAt, s.SendEndedAt)
		}
		return row
	}
	row := Result{Scenario: name, Clients: gens[0].step().Clients, Ratio: -1}
	fig := &clusterFig{}
	var from, to time.Time
	for i, g := range gens {
		s := g.step()
		if from.IsZero() || (!s.SendStartedAt.IsZero() && s.SendStartedAt.Before(from)) {
			from = s.SendStartedAt
		}
		if s.SendEndedAt.After(to) {
			to = s.SendEndedAt
		}
		fig.deliveries += s.ReceivedAll
		fig.saturated = fig.saturated || s.Saturated
		row.GenCPU += g.windowCPU().Seconds()
		// The shard's own notes: connection errors, saturation.
		if t := trafficRow("", g); t.Note != "" {
			addNote(&row, fmt.Sprintf("shard %d: %s", i, t.Note))
		}
	}
	row.Saturated, row.deliveries = fig.saturated, fig.deliveries
	if !from.IsZero() && to.After(from) {
		var cpu time.Duration
		for _, p := range counted {
			cpu += p.cpuBetween(from, to)
			row.RSS += p.maxRSS(from, to)
		}
		row.ServerCPU = cpu.Seconds()
		row.CPUPerDel, row.CPUNote = perDelivery(cpu, fig.deliveries)
		if redis != nil {
			fig.redisCPU = redis.cpuBetween(from, to)
		}
	}
	if d := dur.Seconds(); d > 0 {
		row.PerSecond = float64(fig.deliveries) / d
	}
	row.cluster = fig
	return row
}

// clusterFigures computes a row's figures against the single node's row
// (base) and, for 3 nodes, the 2-node split's figures (two), and fills its
// figure, target and verdict columns.
func clusterFigures(row *Result, base Result, two *clusterFig) *clusterFig {
	f := row.cluster
	f.nodeUS = row.CPUPerDel
	f.nodeShort = row.CPUNote != "" || base.CPUNote != ""
	if f.deliveries > 0 && row.CPUPerDel > 0 && base.CPUPerDel > 0 {
		f.node = row.CPUPerDel / base.CPUPerDel
	}
	if f.deliveries > 0 && f.redisCPU > 0 {
		var note string
		if f.redisUS, note = perDelivery(f.redisCPU, f.deliveries); note != "" {
			f.redisShort = true
			addNote(row, "Redis "+note)
		}
	}
	if f.setup == setupSplit3 && two != nil && two.node > 0 && f.node > 0 {
		f.vsTwo = f.node / two.node
	}
	row.Figure = f.describe()
	row.Target, row.Verdict = f.judge()
	return f
}

// measured reports whether the row has every figure its setup gives.
func (f *clusterFig) measured() bool {
	switch {
	case f.latency:
		return f.crossP50 > 0
	case f.setup.place == alone:
		return f.nodeUS > 0
	case f.setup == setupSplit3:
		return f.node > 0 && f.redisUS > 0 && f.vsTwo > 0
	}
	return f.node > 0 && f.redisUS > 0
}

// describe is the row's figure column.
func (f *clusterFig) describe() string {
	if f.latency {
		return "cross-node p50 " + times(f.crossP50) + " vs same node"
	}
	if f.setup.place == alone {
		return "nodes ×1 (the reference): " + shortOr(f.nodeShort, usOrNA(f.nodeUS)) + " µs/deliv"
	}
	s := "nodes " + shortOr(f.nodeShort, times(f.node)) + " vs 1 node"
	if f.setup == setupSplit3 {
		s += " (" + shortOr(f.nodeShort, times(f.vsTwo)) + " vs 2 nodes)"
	}
	s += "; Redis " + shortOr(f.redisShort, usOrNA(f.redisUS)) + " µs/deliv"
	if f.redisUS > 0 {
		s += " = " + rate(1e6/f.redisUS) + " deliv/s per Redis core"
	}
	return s
}

// limit is one of the targets on a figure.
type limit struct {
	what  string  // the figure, as the verdict names it
	value float64 // 0: not measured
	max   float64
	text  string // the target column
}

// limits are the targets of issue 24 that apply to the row.
func (f *clusterFig) limits() []limit {
	var ls []limit
	switch {
	case f.latency:
		return nil
	case f.small && f.setup == setupOnA:
		ls = append(ls, limit{"nodes", f.node, 1.1, "nodes ≤ ×1.1"})
	case f.small && f.setup == setupSplit2:
		ls = append(ls, limit{"nodes", f.node, 1.3, "nodes ≤ ×1.3"})
	}
	if f.setup == setupSplit3 {
		ls = append(ls, limit{"3 nodes vs 2", f.vsTwo, 1.15, "≤ ×1.15 of 2 nodes"})
	}
	if f.small && f.setup.place == split {
		ls = append(ls, limit{"Redis", f.redisUS, 3, "Redis ≤ 3 µs/deliv"})
	}
	return ls
}

// judge gives the target and verdict columns: "n/a" when a figure could
// not be measured (--smoke), else met or MISSED with what missed.
func (f *clusterFig) judge() (target, result string) {
	ls := f.limits()
	var texts, missed []string
	for _, l := range ls {
		texts = append(texts, l.text)
		if l.value > l.max {
			missed = append(missed, l.what)
		}
	}
	target = strings.Join(texts, "; ")
	switch {
	case !f.measured():
		return target, "n/a"
	case len(ls) == 0:
		return "", ""
	case len(missed) == 0:
		return target, verdict(true, f.saturated)
	}
	return target, strings.Replace(verdict(false, f.saturated), "MISSED", "MISSED ("+strings.Join(missed, ", ")+")", 1)
}

// shortOr is "–" for a figure made of too few CPU clock ticks (the row's
// note says so), else s.
func shortOr(short bool, s string) string {
	if short {
		return "–"
	}
	return s
}

func times(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("×%.2f", v)
}

func usOrNA(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}
