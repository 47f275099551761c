//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// clusterProcs are the servers of a benchmark's setup: the store (Redis,
// or nats-server on NATS) and the nodes of a cluster (started as its
// steps need them), or one serve.
type clusterProcs struct {
	prefix string   // of the log files' names
	extra  []string // serve flags of every node, after the bench's own
	nats   bool     // the nodes share a nats-server, not a redis-server
	store  *proc    // redis-server or nats-server
	nodes  []*proc
}

// The engines a setup's engine: names.
const (
	specEngineRedis = "redis"
	specEngineNATS  = "nats"
)

// clustered reports whether a setup starts a cluster (a store and its
// nodes), not one serve alone.
func (s specServers) clustered() bool {
	return s.Nodes > 1 || s.Redis || s.Engine == specEngineNATS
}

// storeName is the store as rows name it: "Redis" or "NATS"; "" without
// one.
func (c *clusterProcs) storeName() string {
	switch {
	case c.store == nil:
		return ""
	case c.nats:
		return "NATS"
	}
	return "Redis"
}

// grow starts the store (once) and nodes until there are n.
func (c *clusterProcs) grow(ctx context.Context, r *runner, n int) error {
	if c.store == nil {
		start, name := r.startRedis, "-redis"
		if c.nats {
			start, name = r.startNATS, "-nats"
		}
		p, err := start(ctx, c.prefix+name)
		if err != nil {
			return err
		}
		c.store = p
	}
	flags := []string{"--redis", "redis://" + c.store.addr + "/0"}
	if c.nats {
		flags = []string{"--nats", "nats://" + c.store.addr}
	}
	if r.linger != 0 {
		// Serve's --redis-linger holds a round to NATS as to Redis.
		flags = append(flags, "--redis-linger", r.linger.String())
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
	if c.store != nil {
		_ = c.store.shutdown(5 * time.Second)
	}
	c.store, c.nodes = nil, nil
}

// startGenerators starts one generator with args per target node without
// waiting: with several, generator i runs shard i/n on node i, all with
// one room prefix. It returns those started, and the error that stopped
// the others.
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
