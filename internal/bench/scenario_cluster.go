//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Scenario 6: cluster scaling as users meet it (issues 14 and 24). The same
// traffic runs on one node without Redis and on clusters of 2 and 3 nodes
// sharing one redis-server, for rooms of 4, rooms of 50, and clients in 5
// rooms each. Node CPU (the scalechat processes) and Redis CPU are measured
// apart, each per delivery; every cluster row is set against one node alone
// with the same traffic in the same run (cluster_figures.go).

// placement says where a setup puts a shape's clients.
type placement int

const (
	alone placement = iota // one node, no Redis
	onA                    // a cluster of 2, every client on node A: every room owned there
	split                  // a cluster of n, client i on node i mod n (generator shard i/n)
)

// clusterSetup is one way of running a shape's traffic.
type clusterSetup struct {
	name  string
	place placement
	nodes int
}

// clusterShape is one traffic, run on each of its setups in turn.
type clusterShape struct {
	label   string   // row prefix, e.g. "cluster 500×4"
	traffic []string // the loadtest flags that shape the rooms
	clients int
	small   bool // rooms of 4: the targets apply
	setups  []clusterSetup
}

var (
	setupAlone  = clusterSetup{"1 node, no Redis", alone, 1}
	setupOnA    = clusterSetup{"2 nodes, rooms on A", onA, 2}
	setupSplit2 = clusterSetup{"2 nodes, rooms split", split, 2}
	setupSplit3 = clusterSetup{"3 nodes, rooms split", split, 3}
	setupRR2    = clusterSetup{"2 nodes, clients round robin", split, 2}
)

// clusterShapes are the scenario's traffics, full size or smoke size.
func clusterShapes(r *runner) []clusterShape {
	small, large := r.size(500, 5), r.size(40, 2)
	multiRooms, multiClients := r.size(2500, 10), r.size(2000, 8)
	all := []clusterSetup{setupAlone, setupOnA, setupSplit2, setupSplit3}
	return []clusterShape{
		{label: fmt.Sprintf("cluster %d×4", small), traffic: []string{"--rooms", itoa(small), "--room-size", "4"},
			clients: 4 * small, small: true, setups: all},
		{label: fmt.Sprintf("cluster %d×50", large), traffic: []string{"--rooms", itoa(large), "--room-size", "50"},
			clients: 50 * large, setups: all},
		// Each client in 5 rooms (4 members a room on average at full size),
		// every client on one node: its rooms span both nodes.
		{label: fmt.Sprintf("cluster %d×5/%d", multiClients, multiRooms),
			traffic: []string{"--rooms", itoa(multiRooms), "--clients", itoa(multiClients), "--rooms-per-client", "5"},
			clients: multiClients, setups: []clusterSetup{setupAlone, setupRR2}},
	}
}

func runCluster(ctx context.Context, r *runner) ([]Result, error) {
	dur := r.dur(10*time.Second, time.Second)
	var rows []Result
	for _, sh := range clusterShapes(r) {
		got, err := r.clusterShape(ctx, sh, dur)
		rows = append(rows, got...)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", sh.label, err)
		}
	}
	return rows, nil
}

// clusterShape runs one traffic on each of its setups, one after the
// other, and sets every cluster row against the single node's.
func (r *runner) clusterShape(ctx context.Context, sh clusterShape, dur time.Duration) ([]Result, error) {
	var rows []Result
	cl := clusterProcs{prefix: safeName(sh.label)}
	defer cl.stop()
	var base Result
	var two *clusterFig // this shape's 2-node split, for the 3-node target
	for _, st := range sh.setups {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		got, err := r.clusterSetup(ctx, &cl, sh, st, dur)
		if err != nil {
			return append(rows, got...), err
		}
		if st.place == alone {
			base = got[0]
		}
		fig := clusterFigures(&got[0], base, two)
		if st == setupSplit2 {
			two = fig
		}
		if !r.smoke && !fig.measured() {
			return append(rows, got...), fmt.Errorf("%s measured nothing (no deliveries, or no CPU time in its window)", st.name)
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

// clusterProcs are the Redis and the nodes of a shape's cluster, started
// as its setups need them and stopped after its last.
type clusterProcs struct {
	prefix string   // of the log files' names
	extra  []string // serve flags of every node, after the bench's own
	redis  *proc
	nodes  []*proc
}

// grow starts Redis (once) and nodes until there are n.
func (c *clusterProcs) grow(ctx context.Context, r *runner, n int) error {
	if c.redis == nil {
		p, err := r.startRedis(ctx, c.prefix+"-redis")
		if err != nil {
			return err
		}
		c.redis = p
	}
	flags := []string{"--redis", "redis://" + c.redis.addr + "/0"}
	if r.linger != 0 {
		flags = append(flags, "--redis-linger", r.linger.String())
	}
	if r.order != "" {
		flags = append(flags, "--room-order", r.order)
	}
	flags = append(flags, c.extra...)
	for len(c.nodes) < n {
		p, err := r.startServer(ctx, fmt.Sprintf("%s-node-%c", c.prefix, 'a'+len(c.nodes)), flags...)
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, p)
	}
	return nil
}

func (c *clusterProcs) stop() {
	for _, p := range c.nodes {
		_ = p.shutdown(5 * time.Second)
	}
	if c.redis != nil {
		_ = c.redis.shutdown(5 * time.Second)
	}
	c.redis, c.nodes = nil, nil
}

// clusterSetup runs a shape's traffic on one setup: its row first, then,
// for a split, the rows of same-node and cross-node deliveries.
func (r *runner) clusterSetup(ctx context.Context, cl *clusterProcs, sh clusterShape, st clusterSetup, dur time.Duration) ([]Result, error) {
	name := sh.label + ": " + st.name
	tag := safeName(name)
	var targets, counted []*proc
	var redis *proc
	switch st.place {
	case alone:
		single, err := r.startServer(ctx, tag+"-server")
		if err != nil {
			return nil, err
		}
		defer single.shutdown(5 * time.Second)
		targets, counted = []*proc{single}, []*proc{single}
	default:
		if err := cl.grow(ctx, r, st.nodes); err != nil {
			return nil, err
		}
		// Every node of the cluster counts, an idle one too: it is part of
		// what the users run.
		counted, redis = cl.nodes[:st.nodes], cl.redis
		targets = counted
		if st.place == onA {
			targets = counted[:1]
		}
	}
	gens, err := r.clusterGenerators(ctx, tag, sh, targets, dur)
	if err != nil {
		return nil, err
	}
	row := mergedRow(name, gens, counted, redis, dur)
	row.cluster.small, row.cluster.setup = sh.small, st
	if st.place != alone {
		addNote(&row, fmt.Sprintf("server CPU = the nodes (%s); Redis apart; all on CPU %s", nodeLetters(len(counted)), r.serverList()))
	}
	if len(gens) > 1 {
		addNote(&row, fmt.Sprintf("%d generators, shard i/%d → node %s", len(gens), len(gens), nodeLetters(len(gens))))
	}
	rows := []Result{row}
	if len(gens) < 2 {
		return rows, nil
	}
	lat, err := nodeDeliveries(name, gens, dur)
	if err != nil {
		return rows, err
	}
	if lat.all != nil {
		// The shards' own delivery ratios only count their own clients'
		// messages: the whole run's comes from the events.
		rows[0].Ratio, rows[0].P50, rows[0].P99, rows[0].Max = lat.all.ratio(), lat.all.ms(50), lat.all.ms(99), lat.all.ms(100)
	}
	return append(rows, lat.rows...), nil
}

// clusterGenerators runs one generator per target node: with several,
// generator i runs shard i/n on node i, all with one room prefix.
func (r *runner) clusterGenerators(ctx context.Context, tag string, sh clusterShape, targets []*proc, dur time.Duration) ([]*genRun, error) {
	args := append([]string{"--msg-frequency", "1s", "--msg-size", "256", "--duration", dur.String(), "--ramp", "5000",
		"--drain", "3s", "--source-ips", sources}, sh.traffic...)
	return r.generators(ctx, tag, targets, timeoutFor(sh.clients, 5000, dur), args)
}

// generators runs one generator with args per target node: with several,
// generator i runs shard i/n on node i, all with one room prefix.
func (r *runner) generators(ctx context.Context, tag string, targets []*proc, timeout time.Duration, args []string) ([]*genRun, error) {
	started, err := r.startGenerators(ctx, tag, targets, timeout, args)
	runs, werr := waitGenerators(started)
	if err := errors.Join(err, werr); err != nil {
		return nil, err
	}
	return runs, nil
}

// startGenerators starts the generators of generators without waiting:
// those started, and the error that stopped the others.
func (r *runner) startGenerators(ctx context.Context, tag string, targets []*proc, timeout time.Duration, args []string) ([]*loadgen, error) {
	if len(targets) == 1 {
		g, err := r.startLoadtest(ctx, tag, wsURL(targets[0]), timeout, args...)
		if err != nil {
			return nil, err
		}
		return []*loadgen{g}, nil
	}
	prefix := fmt.Sprintf("bench%d", time.Now().UnixNano())
	var started []*loadgen
	for i, p := range targets {
		g, err := r.startLoadtest(ctx, fmt.Sprintf("%s-%d", tag, i), wsURL(p), timeout,
			slices.Concat(args, []string{"--shard", fmt.Sprintf("%d/%d", i, len(targets)), "--room-prefix", prefix})...)
		if err != nil {
			return started, err
		}
		started = append(started, g)
	}
	return started, nil
}

// waitGenerators waits for every generator started, whatever happened to
// the others.
func waitGenerators(started []*loadgen) ([]*genRun, error) {
	var runs []*genRun
	var errs []error
	for _, g := range started {
		run, err := g.wait()
		errs = append(errs, err)
		runs = append(runs, run)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return runs, nil
}

// nodeLetters names the first n nodes: "A, B" or "A, B, C".
func nodeLetters(n int) string {
	s := ""
	for i := range n {
		if i > 0 {
			s += ", "
		}
		s += string(rune('A' + i))
	}
	return s
}

// safeName turns a row label into a file name for logs and CSVs.
func safeName(s string) string {
	out := []rune{}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			out = append(out, c)
		case c == '×':
			out = append(out, 'x')
		default:
			if len(out) > 0 && out[len(out)-1] != '-' {
				out = append(out, '-')
			}
		}
	}
	return string(out)
}
