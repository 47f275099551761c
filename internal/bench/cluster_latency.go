//go:build linux

package bench

import "time"

// nodeLatency is what the events of a split run say: the latency of
// same-node and cross-node deliveries, and of all of them.
type nodeLatency struct {
	rows []Result
	all  *latencies // nil without events (--no-csv)
}

// nodeDeliveries reads the events of a run split over len(gens) nodes and
// gives same-node and cross-node deliveries a row each. Generator i ran
// shard i/n on node i, and with one step and one worker a client's shard
// is its index mod n (its id is its index), so its node is id mod n.
func nodeDeliveries(prefix string, gens []*genRun, dur time.Duration) (nodeLatency, error) {
	paths := make([]string, 0, len(gens))
	for _, g := range gens {
		if g.csv == "" {
			return nodeLatency{}, nil
		}
		paths = append(paths, g.csv)
	}
	ev, err := readEvents(paths...)
	if err != nil {
		return nodeLatency{}, err
	}
	n := uint64(len(gens))
	groups := ev.group(func(sentMsg) bool { return true }, func(sender, recipient uint64) string {
		if sender%n == recipient%n {
			return "same-node"
		}
		return "cross-node"
	})
	out := nodeLatency{all: newLatencies()}
	for _, name := range []string{"same-node", "cross-node"} {
		l := groups[name]
		if l == nil {
			continue
		}
		out.all.h.Merge(l.h)
		out.all.expected += l.expected
		row := Result{Scenario: prefix + ": " + name + " deliveries", Ratio: l.ratio(), P50: l.ms(50), P99: l.ms(99), Max: l.ms(100)}
		if d := dur.Seconds(); d > 0 {
			row.PerSecond = float64(l.count()) / d
		}
		out.rows = append(out.rows, row)
	}
	if s, c := groups["same-node"], groups["cross-node"]; s != nil && c != nil {
		cross, ratio := &out.rows[len(out.rows)-1], 0.0
		if s.ms(50) > 0 && c.ms(50) > 0 {
			ratio = c.ms(50) / s.ms(50)
		}
		cross.Figure = "cross-node p50 " + times(ratio) + " vs same node"
	}
	return out, nil
}
