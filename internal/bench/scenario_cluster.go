package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Scenario 6: two nodes and Redis against one node.

func runCluster(ctx context.Context, r *runner) ([]Result, error) {
	rooms := r.size(500, 5)
	dur := r.dur(10*time.Second, time.Second)
	args := func(extra ...string) []string { return roomsArgs(rooms, dur, extra...) }
	var rows []Result

	// Baseline: the same traffic on one node without Redis.
	single, err := r.startServer(ctx, "cluster-single")
	if err != nil {
		return nil, err
	}
	g, err := r.runLoadtest(ctx, "cluster-single", wsURL(single), timeoutFor(4*rooms, 5000, dur), args()...)
	_ = single.shutdown(5 * time.Second)
	if err != nil {
		return nil, err
	}
	rows = append(rows, trafficRow("cluster: 1 node, no Redis", g, single))

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

	// All members of every room on node A: every delivery is local (each
	// message still takes its seq from Redis).
	g, err = r.runLoadtest(ctx, "cluster-local", wsURL(a), timeoutFor(4*rooms, 5000, dur), args()...)
	if err != nil {
		return rows, err
	}
	local := trafficRow("cluster: all on node A", g, a, b, redis)
	addNote(&local, "server CPU = node A + node B + Redis, all on CPU "+serverCPU)
	rows = append(rows, local)

	// Every room split over both nodes: shard 0 (even clients) on A, shard
	// 1 (odd clients) on B, so half the deliveries cross nodes.
	prefix := fmt.Sprintf("bench%d", time.Now().UnixNano())
	ga, err := r.startLoadtest(ctx, "cluster-cross-a", wsURL(a), timeoutFor(4*rooms, 5000, dur), args("--shard", "0/2", "--room-prefix", prefix)...)
	if err != nil {
		return rows, err
	}
	gb, errB := r.startLoadtest(ctx, "cluster-cross-b", wsURL(b), timeoutFor(4*rooms, 5000, dur), args("--shard", "1/2", "--room-prefix", prefix)...)
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
	for _, p := range []*proc{a, b, redis} {
		cpu += p.cpuBetween(from, to)
		rss += p.maxRSS(from, to)
	}
	dels := sa.ReceivedAll + sb.ReceivedAll
	cross := Result{Scenario: "cluster: rooms split over A and B", Clients: sa.Clients, Ratio: -1, ServerCPU: cpu.Seconds(), RSS: rss,
		GenCPU: (ra.windowCPU() + rb.windowCPU()).Seconds(), Saturated: sa.Saturated || sb.Saturated}
	if d := dur.Seconds(); d > 0 {
		cross.PerSecond = float64(dels) / d
	}
	if dels > 0 {
		cross.CPUPerDel = float64(cpu.Microseconds()) / float64(dels)
	}
	if local.CPUPerDel > 0 {
		cross.Figure = fmt.Sprintf("CPU ×%.2f vs all local", cross.CPUPerDel/local.CPUPerDel)
	}
	addNote(&cross, "two generators (shards 0/2 → node A, 1/2 → node B); CPU = A + B + Redis")
	rows = append(rows, cross)
	split, err := splitDeliveries(ra, rb, dur)
	return append(rows, split...), err
}

// splitDeliveries reads the events of the split run and gives the latency
// of same-node and cross-node deliveries a row each.
func splitDeliveries(ra, rb *genRun, dur time.Duration) ([]Result, error) {
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
		row := Result{Scenario: "cluster: split, " + name + " deliveries", Ratio: l.ratio(), P50: l.ms(50), P99: l.ms(99), Max: l.ms(100)}
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
