//go:build linux

package bench

import (
	"fmt"
	"time"
)

// clusterFig is what a cluster row measured beyond the table's columns,
// for its figures and the results file. A figure of 0 was not measured
// (too short a run).
type clusterFig struct {
	// nats: the store is nats-server (engine: nats), not redis-server.
	nats bool
	// Raw measures over the sending window.
	storeCPU   time.Duration // the store's: redis-server's or nats-server's
	deliveries int64
	saturated  bool
	// Figures.
	node    float64 // node CPU per delivery ÷ one node alone's (node_cpu_vs_one_node)
	storeUS float64 // µs of the store's CPU per delivery
}

// mergedRow is a setup's row from its generators (one per node it used)
// and the processes that carried the traffic, over the sending window of
// all generators together; store is the cluster's redis-server or
// nats-server (nats), nil without one.
func mergedRow(name string, gens []*genRun, counted []*proc, store *proc, nats bool, dur time.Duration) Result {
	if len(gens) == 1 {
		row := trafficRow(name, gens[0], counted...)
		s := gens[0].step()
		row.cluster = &clusterFig{nats: nats, deliveries: s.ReceivedAll, saturated: s.Saturated}
		if store != nil && !s.SendStartedAt.IsZero() {
			row.cluster.storeCPU = store.cpuBetween(s.SendStartedAt, s.SendEndedAt)
		}
		return row
	}
	row := Result{Scenario: name, Clients: gens[0].step().Clients, Ratio: -1}
	fig := &clusterFig{nats: nats}
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
		if store != nil {
			fig.storeCPU = store.cpuBetween(from, to)
		}
	}
	if d := dur.Seconds(); d > 0 {
		row.PerSecond = float64(fig.deliveries) / d
	}
	row.cluster = fig
	return row
}

// times is a ratio as the figure column shows it: "n/a" when not
// measured.
func times(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("×%.2f", v)
}
