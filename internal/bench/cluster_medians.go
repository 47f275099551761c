//go:build linux

package bench

import (
	"fmt"
	"slices"
	"strings"
)

// clusterMedians summarises the runs of `scalechat bench --repeat N
// cluster`: for each row of the table, the medians of its figures over
// the runs, judged against the targets as one run is. The machine is
// shared, so one run's ratios swing; their medians much less.
func clusterMedians(runs [][]Result) []Result {
	var order []string
	figs := map[string][]*clusterFig{}
	for _, rows := range runs {
		for _, row := range rows {
			if row.cluster == nil {
				continue
			}
			if _, seen := figs[row.Scenario]; !seen {
				order = append(order, row.Scenario)
			}
			figs[row.Scenario] = append(figs[row.Scenario], row.cluster)
		}
	}
	var out []Result
	for _, name := range order {
		fs := figs[name]
		m := medianFig(fs)
		row := Result{Scenario: fmt.Sprintf("%s: median of %d", name, len(fs)), Ratio: -1, CPUPerDel: m.nodeUS, Saturated: m.saturated}
		row.Figure = m.describe() + "; runs " + runList(fs, m)
		row.Target, row.Verdict = m.judge()
		out = append(out, row)
	}
	return out
}

// medianFig is fs[0]'s setup with the median of each figure over the runs
// that measured it; saturated when any run was.
func medianFig(fs []*clusterFig) *clusterFig {
	m := *fs[0]
	pick := func(get func(*clusterFig) float64) float64 {
		var v []float64
		for _, f := range fs {
			if x := get(f); x > 0 {
				v = append(v, x)
			}
		}
		if len(v) == 0 {
			return 0
		}
		return median(v)
	}
	m.nodeUS = pick(func(f *clusterFig) float64 { return f.nodeUS })
	m.node = pick(func(f *clusterFig) float64 { return f.node })
	m.redisUS = pick(func(f *clusterFig) float64 { return f.redisUS })
	m.vsTwo = pick(func(f *clusterFig) float64 { return f.vsTwo })
	m.crossP50 = pick(func(f *clusterFig) float64 { return f.crossP50 })
	m.saturated = slices.ContainsFunc(fs, func(f *clusterFig) bool { return f.saturated })
	// "–" only where no run measured the figure and one had too few ticks.
	nodeFigure := m.node
	if m.setup.place == alone {
		nodeFigure = m.nodeUS
	}
	m.nodeShort = nodeFigure == 0 && slices.ContainsFunc(fs, func(f *clusterFig) bool { return f.nodeShort })
	m.redisShort = m.redisUS == 0 && slices.ContainsFunc(fs, func(f *clusterFig) bool { return f.redisShort })
	return &m
}

// runList is each run's key figure, in run order: the node ratio, the
// node µs of the reference, or the cross-node p50 ratio.
func runList(fs []*clusterFig, m *clusterFig) string {
	var parts []string
	for _, f := range fs {
		switch {
		case m.latency:
			parts = append(parts, times(f.crossP50))
		case m.setup.place == alone:
			parts = append(parts, shortOr(f.nodeShort, usOrNA(f.nodeUS))+" µs")
		default:
			parts = append(parts, shortOr(f.nodeShort, times(f.node))+" / "+shortOr(f.redisShort, usOrNA(f.redisUS))+" µs")
		}
	}
	return strings.Join(parts, ", ")
}
