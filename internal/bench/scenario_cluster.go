//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Scenario 6: two nodes and Redis against one node, for small rooms and
// for larger ones. Node CPU (the scalechat processes) and Redis CPU are
// measured apart: the targets are on the nodes, Redis is reported beside.

func runCluster(ctx context.Context, r *runner) ([]Result, error) {
	dur := r.dur(10*time.Second, time.Second)
	var rows []Result
	for _, shape := range []struct{ rooms, size int }{{r.size(500, 5), 4}, {r.size(40, 2), 50}} {
		got, err := clusterShape(ctx, r, shape.rooms, shape.size, dur)
		rows = append(rows, got...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// clusterShape runs the same traffic (rooms × size clients, 1 msg/s each)
// on one node alone, on a cluster of two nodes with every room's members on
// node A, and on the cluster with every room split over A and B.
func clusterShape(ctx context.Context, r *runner, rooms, size int, dur time.Duration) ([]Result, error) {
	name := fmt.Sprintf("cluster %d×%d: ", rooms, size)
	clients := rooms * size
	args := func(extra ...string) []string {
		return append([]string{"--rooms", itoa(rooms), "--room-size", itoa(size), "--msg-frequency", "1s", "--msg-size", "256",
			"--duration", dur.String(), "--ramp", "5000", "--drain", "3s", "--source-ips", sources}, extra...)
	}
	timeout := timeoutFor(clients, 5000, dur)
	var rows []Result

	// Baseline: the same traffic on one node without Redis.
	single, err := r.startServer(ctx, "cluster-single")
	if err != nil {
		return nil, err
	}
	g, err := r.runLoadtest(ctx, "cluster-single", wsURL(single), timeout, args()...)
	_ = single.shutdown(5 * time.Second)
	if err != nil {
		return nil, err
	}
	base := trafficRow(name+"1 node, no Redis", g, single)
	rows = append(rows, base)

	redis, err := r.startRedis(ctx, "cluster-redis")
	if err != nil {
		return rows, err
	}
	defer redis.shutdown(5 * time.Second)
	url := "redis://" + redis.addr + "/0"
	a, err := r.startServer(ctx, "cluster-node-a", "--redis", url)
	if err != nil {
		return rows, err
	}
	defer a.shutdown(5 * time.Second)
	b, err := r.startServer(ctx, "cluster-node-b", "--redis", url)
	if err != nil {
		return rows, err
	}
	defer b.shutdown(5 * time.Second)

	// All members of every room on node A: every delivery is local.
	g, err = r.runLoadtest(ctx, "cluster-local", wsURL(a), timeout, args()...)
	if err != nil {
		return rows, err
	}
	local := trafficRow(name+"2 nodes, rooms on A", g, a, b)
	s := g.step()
	clusterFigures(&local, base, redis.cpuBetween(s.SendStartedAt, s.SendEndedAt), s.ReceivedAll, "≤ 1.25× 1 node", 1.25)
	rows = append(rows, local)

	// Every room split over both nodes: shard 0 (even clients) on A, shard
	// 1 (odd clients) on B, so half the deliveries cross nodes.
	prefix := fmt.Sprintf("bench%d", time.Now().UnixNano())
	ga, err := r.startLoadtest(ctx, "cluster-cross-a", wsURL(a), timeout, args("--shard", "0/2", "--room-prefix", prefix)...)
	if err != nil {
		return rows, err
	}
	gb, errB := r.startLoadtest(ctx, "cluster-cross-b", wsURL(b), timeout, args("--shard", "1/2", "--room-prefix", prefix)...)
	ra, errA := ga.wait()
	if errB != nil {
		return rows, errB
	}
	rb, errB := gb.wait()
	if err := errors.Join(errA, errB); err != nil {
		return rows, err
	}
	sa, sb := ra.step(), rb.step()
	from, to := sa.SendStartedAt, sa.SendEndedAt
	if sb.SendStartedAt.Before(from) {
		from = sb.SendStartedAt
	}
	if sb.SendEndedAt.After(to) {
		to = sb.SendEndedAt
	}
	var cpu time.Duration
	var rss int64
	for _, p := range []*proc{a, b} {
		cpu += p.cpuBetween(from, to)
		rss += p.maxRSS(from, to)
	}
	dels := sa.ReceivedAll + sb.ReceivedAll
	// The delivery ratio is in the same-node and cross-node rows.
	cross := Result{Scenario: name + "2 nodes, rooms split", Clients: sa.Clients, Ratio: -1, ServerCPU: cpu.Seconds(), RSS: rss,
		GenCPU: (ra.windowCPU() + rb.windowCPU()).Seconds(), Saturated: sa.Saturated || sb.Saturated}
	if d := dur.Seconds(); d > 0 {
		cross.PerSecond = float64(dels) / d
	}
	if dels > 0 {
		cross.CPUPerDel = float64(cpu.Microseconds()) / float64(dels)
	}
	clusterFigures(&cross, base, redis.cpuBetween(from, to), dels, "≤ 1.6× 1 node", 1.6)
	addNote(&cross, "two generators (shards 0/2 → node A, 1/2 → node B)")
	rows = append(rows, cross)
	split, err := splitDeliveries(name, ra, rb, dur)
	return append(rows, split...), err
}

// clusterFigures sets a cluster row's figure (node CPU per delivery against
// the single node's, Redis CPU per delivery beside) and its target.
func clusterFigures(row *Result, base Result, redisCPU time.Duration, deliveries int64, target string, limit float64) {
	row.Target = target
	if base.CPUPerDel <= 0 || row.CPUPerDel <= 0 || deliveries <= 0 {
		row.Verdict = "n/a" // too short to measure (--smoke)
		return
	}
	ratio := row.CPUPerDel / base.CPUPerDel
	redisPer := float64(redisCPU.Microseconds()) / float64(deliveries)
	row.Figure = fmt.Sprintf("nodes ×%.2f vs 1 node; Redis %.2f µs/deliv", ratio, redisPer)
	row.Verdict = verdict(ratio <= limit, row.Saturated || base.Saturated)
	addNote(row, "server CPU = the nodes (A + B); Redis apart, all on CPU "+serverCPU)
}

// splitDeliveries reads the events of the split run and gives the latency
// of same-node and cross-node deliveries a row each.
func splitDeliveries(prefix string, ra, rb *genRun, dur time.Duration) ([]Result, error) {
	if ra.csv == "" || rb.csv == "" {
		return nil, nil
	}
	ev, err := readEvents(ra.csv, rb.csv)
	if err != nil {
		return nil, err
	}
	// A client's shard, hence its node, is its index mod 2 (one step: id = index).
	groups := ev.group(func(sentMsg) bool { return true }, func(sender, recipient uint64) string {
		if sender%2 == recipient%2 {
			return "same node"
		}
		return "cross node"
	})
	var rows []Result
	for _, name := range []string{"same node", "cross node"} {
		l := groups[name]
		if l == nil {
			continue
		}
		row := Result{Scenario: prefix + "split, " + name + " deliveries", Ratio: l.ratio(), P50: l.ms(50), P99: l.ms(99), Max: l.ms(100)}
		if d := dur.Seconds(); d > 0 {
			row.PerSecond = float64(l.count()) / d
		}
		rows = append(rows, row)
	}
	if s, c := groups["same node"], groups["cross node"]; s != nil && c != nil && s.ms(50) > 0 {
		rows[len(rows)-1].Figure = fmt.Sprintf("p50 ×%.2f vs same node", c.ms(50)/s.ms(50))
	}
	return rows, nil
}
