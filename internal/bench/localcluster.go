//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// LocalCluster is a redis-server (or a Redis Cluster, or NATS: one
// nats-server or three) and scalechat nodes on loopback, started
// with the bench's process machinery for the lab's other runs (scalechat
// audit), whose methods inject process faults. Nodes are not pinned: the
// audit is about correctness, not cost.
type LocalCluster struct {
	r       *runner
	cleanup func()
	ctx     context.Context

	rc   *redisCluster // a Redis Cluster instead of one redis-server
	nats *natsServers  // NATS instead of Redis (localcluster_nats.go)

	extra []string // more flags for every node

	mu        sync.Mutex
	redis     *proc
	redisPort int
	links     []*redisLink // each node's path to the one Redis (CutNode)
	nodes     []*proc
	addrs     []string
	restarts  int
}

// StartLocalCluster starts redis-server and n nodes using it (exe: the
// scalechat binary, "" for this one; dir: logs, "" for a temporary folder
// removed by Stop), each node with flags besides its own.
func StartLocalCluster(ctx context.Context, exe, dir string, n int, log io.Writer, flags ...string) (*LocalCluster, error) {
	return startLocalCluster(ctx, exe, dir, n, engineRedis, log, flags)
}

// StartLocalRedisCluster is StartLocalCluster on a Redis Cluster of 3
// masters with a replica each instead of one redis-server.
func StartLocalRedisCluster(ctx context.Context, exe, dir string, n int, log io.Writer, flags ...string) (*LocalCluster, error) {
	return startLocalCluster(ctx, exe, dir, n, engineRedisCluster, log, flags)
}

// engine is what ties a local cluster's nodes.
type engine int

const (
	engineRedis        engine = iota // one redis-server
	engineRedisCluster               // a Redis Cluster of 3 masters with a replica each
	engineNATS                       // one nats-server with JetStream
	engineNATSCluster                // three nats-servers routed as one NATS cluster
)

func startLocalCluster(ctx context.Context, exe, dir string, n int, eng engine, log io.Writer, flags []string) (*LocalCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("a cluster needs at least 1 node, not %d", n)
	}
	r, cleanup, err := newRunner(exe, dir, false, log)
	if err != nil {
		return nil, err
	}
	r.taskset = ""
	c := &LocalCluster{r: r, cleanup: cleanup, ctx: context.WithoutCancel(ctx), extra: flags}
	switch eng {
	case engineRedisCluster:
		c.rc, err = startRedisCluster(c.ctx, r)
	case engineNATS, engineNATSCluster:
		servers := 1
		if eng == engineNATSCluster {
			servers = natsClusterSize
		}
		c.nats, err = startNATSServers(c.ctx, r, servers)
	default:
		err = c.startRedis()
	}
	if err != nil {
		c.Stop()
		return nil, err
	}
	for i := range n {
		// The node's link listens first: a port freePort gives back is
		// free only until someone takes it, and the link's listener on :0
		// once took the node's (CI: "node1 exited", address in use).
		if c.redis != nil {
			l, err := newRedisLink("127.0.0.1:" + strconv.Itoa(c.redisPort))
			if err != nil {
				c.Stop()
				return nil, err
			}
			c.links = append(c.links, l)
		}
		port, err := freePort()
		if err != nil {
			c.Stop()
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, err := r.startServerAt(c.ctx, "node"+strconv.Itoa(i), addr, c.nodeFlags(i)...)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes, c.addrs = append(c.nodes, p), append(c.addrs, addr)
	}
	return c, nil
}

func (c *LocalCluster) startRedis() error {
	var err error
	if c.redisPort, err = freePort(); err != nil {
		return err
	}
	c.redis, err = c.r.startRedisAt(c.ctx, "redis", c.redisPort)
	return err
}

// nodeFlags are node i's flags: it reaches the one Redis through its own
// link, a Redis Cluster and NATS directly.
func (c *LocalCluster) nodeFlags(i int) []string {
	var engine []string
	switch {
	case c.nats != nil:
		engine = c.nats.nodeFlags()
	case c.rc != nil:
		engine = []string{"--redis", c.rc.url()}
	default:
		engine = []string{"--redis", "redis://" + c.links[i].addr() + "/0"}
	}
	return append(append(engine, "--shutdown-timeout", "2s"), c.extra...)
}

// Engine names what ties the nodes, as the audit's report says it: Redis,
// a Redis Cluster, NATS or a NATS cluster of 3 servers.
func (c *LocalCluster) Engine() string {
	switch {
	case c.nats != nil && len(c.nats.ports) > 1:
		return fmt.Sprintf("a NATS cluster of %d servers", len(c.nats.ports))
	case c.nats != nil:
		return "NATS"
	case c.rc != nil:
		return "a Redis Cluster"
	}
	return "Redis"
}

// URLs are the nodes' WebSocket base URLs (…/ws).
func (c *LocalCluster) URLs() []string {
	out := make([]string, len(c.addrs))
	for i, a := range c.addrs {
		out[i] = "ws://" + a + "/ws"
	}
	return out
}

// Nodes is the number of nodes.
func (c *LocalCluster) Nodes() int { return len(c.addrs) }

// StopNode ends node i with sig: SIGKILL (a crash) or SIGTERM (a drain).
// It returns when the process is gone.
func (c *LocalCluster) StopNode(i int, sig syscall.Signal) error {
	c.mu.Lock()
	p := c.nodes[i]
	c.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal node %d: %w", i, err)
	}
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.halt()
	p.log.Close()
	return nil
}

// StartNode starts node i again on its address, after StopNode.
func (c *LocalCluster) StartNode(i int) error {
	c.mu.Lock()
	c.restarts++
	name := fmt.Sprintf("node%d-restart%d", i, c.restarts)
	c.mu.Unlock()
	p, err := c.r.startServerAt(c.ctx, name, c.addrs[i], c.nodeFlags(i)...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[i] = p
	c.mu.Unlock()
	return nil
}

// PauseNode stops node i (SIGSTOP) for d, then lets it go on (SIGCONT).
func (c *LocalCluster) PauseNode(ctx context.Context, i int, d time.Duration) error {
	c.mu.Lock()
	p := c.nodes[i]
	c.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return p.cmd.Process.Signal(syscall.SIGCONT)
}

// CutNode cuts node i off from the one Redis for d (its connections
// closed, new ones refused) while the node and its clients go on: a
// partition between a node and Redis.
func (c *LocalCluster) CutNode(ctx context.Context, i int, d time.Duration) error {
	if c.links == nil {
		return errors.New("a node is cut off from one Redis, not from a Redis Cluster or NATS")
	}
	c.links[i].cut(d)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// RestartRedis stops redis-server (SIGTERM, no persistence: its data is
// gone), waits down, and starts it again on the same port.
func (c *LocalCluster) RestartRedis(ctx context.Context, down time.Duration) error {
	if c.rc != nil {
		return errors.New("a Redis Cluster is not restarted whole: fail one master over instead")
	}
	if c.redis == nil {
		return errors.New("no redis-server to restart: the nodes use NATS")
	}
	c.mu.Lock()
	p := c.redis
	c.restarts++
	name := fmt.Sprintf("redis-restart%d", c.restarts)
	c.mu.Unlock()
	if err := p.shutdown(5 * time.Second); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	np, err := c.r.startRedisAt(c.ctx, name, c.redisPort)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.redis = np
	c.mu.Unlock()
	return nil
}

// FailoverRedis SIGKILLs the Redis Cluster master that serves the most of
// rooms, waits until its replica is promoted, and starts it again (it
// rejoins as a replica). It returns what it killed and how long the
// promotion took.
func (c *LocalCluster) FailoverRedis(ctx context.Context, rooms []string) (string, error) {
	if c.rc == nil {
		return "", errors.New("a failover needs a Redis Cluster")
	}
	return c.rc.failover(ctx, rooms)
}

// Stop ends every process and removes a temporary folder.
func (c *LocalCluster) Stop() {
	c.mu.Lock()
	nodes, redis := c.nodes, c.redis
	c.mu.Unlock()
	for _, p := range nodes {
		_ = p.shutdown(5 * time.Second)
	}
	if redis != nil {
		_ = redis.shutdown(5 * time.Second)
	}
	if c.rc != nil {
		c.rc.stop()
	}
	if c.nats != nil {
		c.nats.stop()
	}
	for _, l := range c.links {
		_ = l.close()
	}
	c.cleanup()
}
