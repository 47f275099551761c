//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// redisCluster is a Redis Cluster of real redis-servers in cluster mode on
// loopback: 3 masters with a replica each, made one cluster by redis-cli
// --cluster create, as internal/testsupport/rediscluster.go does for the
// tests. A node is taken for failed after 1 s without an answer, so a
// replica takes over a killed master within a few seconds.
type redisCluster struct {
	r   *runner
	ctx context.Context

	mu       sync.Mutex
	procs    []*proc
	ports    []int
	restarts int
}

const (
	clusterMasters = 3
	// A node's cluster bus listens on its port + 10000. Both stay below
	// the kernel's ephemeral ports (32768 on), where an outgoing
	// connection could take the bus port between our check and its bind.
	clusterPortLow, clusterPortHigh = 12000, 22768
)

// startRedisCluster starts 6 nodes and creates the cluster.
func startRedisCluster(ctx context.Context, r *runner) (*redisCluster, error) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, errors.New("redis-cli not found (apt-get install redis-tools): it creates the Redis Cluster")
	}
	c := &redisCluster{r: r, ctx: ctx}
	for i := range 2 * clusterMasters {
		port, err := clusterPort(c.ports)
		if err != nil {
			c.stop()
			return nil, err
		}
		p, err := c.startNode(fmt.Sprintf("redis-cluster%d", i), port)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.procs, c.ports = append(c.procs, p), append(c.ports, port)
	}
	args := []string{"--cluster", "create"}
	for _, p := range c.ports {
		args = append(args, "127.0.0.1:"+strconv.Itoa(p))
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.waitHealthy(ctx, 30*time.Second, true); err != nil {
		c.stop()
		return nil, err
	}
	r.logf("redis cluster: %d masters with a replica each on %v", clusterMasters, c.ports)
	return c, nil
}

// startNode starts one cluster node on port; its nodes.conf is kept in a
// folder of its own, so that a restarted node rejoins the cluster.
func (c *redisCluster) startNode(name string, port int) (*proc, error) {
	dir := filepath.Join(c.r.dir, "redis-cluster-"+strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return c.r.startRedisAt(c.ctx, name, port, "--dir", dir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0")
}

// clusterPort returns a free port whose bus port is free too.
func clusterPort(taken []int) (int, error) {
	for range 200 {
		p := clusterPortLow + rand.IntN(clusterPortHigh-clusterPortLow)
		ok := portFree(p) && portFree(p+10000)
		for _, t := range taken {
			ok = ok && p != t && p != t+10000 && p+10000 != t
		}
		if ok {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free pair of ports (port and port+10000) in %d-%d for a Redis Cluster node", clusterPortLow, clusterPortHigh)
}

func portFree(port int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// url is the redis-cluster:// URL naming every node as a seed.
func (c *redisCluster) url() string {
	addrs := make([]string, len(c.ports))
	for i, p := range c.ports {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}

// cli runs redis-cli against node i.
func (c *redisCluster) cli(ctx context.Context, i int, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-p", strconv.Itoa(c.ports[i])}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("redis-cli -p %d %s: %w: %s", c.ports[i], strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// alive is the indexes of the nodes whose process runs.
func (c *redisCluster) alive() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, p := range c.procs {
		if p.alive() == nil {
			out = append(out, i)
		}
	}
	return out
}

// waitHealthy waits until every running node says the cluster serves every
// slot and, with replicas, until every master has its replica in sync (a
// replica that has not synced cannot take over with the data).
func (c *redisCluster) waitHealthy(ctx context.Context, limit time.Duration, replicas bool) error {
	deadline := time.Now().Add(limit)
	for _, i := range c.alive() {
		for {
			info, err := c.cli(ctx, i, "cluster", "info")
			ok := err == nil && strings.Contains(info, "cluster_state:ok")
			if ok && replicas {
				repl, err := c.cli(ctx, i, "info", "replication")
				ok = err == nil && (!strings.Contains(repl, "role:master") || strings.Contains(repl, "state=online"))
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the Redis Cluster at port %d was not healthy within %s (last: %v)", c.ports[i], limit, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	addr   string // host:port
	master bool
	failed bool
	slots  [][2]int
}

func parseClusterNodes(out string) []clusterNode {
	var nodes []clusterNode
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{addr: addr, master: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")}
		for _, r := range f[8:] {
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil { // importing/migrating entries ([…]) are skipped
				n.slots = append(n.slots, [2]int{l, h})
			}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// masterOf is the live master serving slot, by CLUSTER NODES of node i.
func (c *redisCluster) masterOf(ctx context.Context, i, slot int) (string, error) {
	out, err := c.cli(ctx, i, "cluster", "nodes")
	if err != nil {
		return "", err
	}
	for _, n := range parseClusterNodes(out) {
		for _, r := range n.slots {
			if n.master && !n.failed && r[0] <= slot && slot <= r[1] {
				return n.addr, nil
			}
		}
	}
	return "", nil
}

// failover SIGKILLs the master that serves the most of rooms (their keys
// share the slot of "{room}"), waits until a replica serves its slots,
// and starts the killed node again, which rejoins as a replica.
func (c *redisCluster) failover(ctx context.Context, rooms []string) (string, error) {
	live := c.alive()
	if len(live) == 0 {
		return "", errors.New("no node of the Redis Cluster runs")
	}
	slots := map[string][]int{} // master -> slots of rooms
	for _, room := range rooms {
		out, err := c.cli(ctx, live[0], "cluster", "keyslot", "{"+room+"}")
		if err != nil {
			return "", err
		}
		slot, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			return "", fmt.Errorf("CLUSTER KEYSLOT answered %q", out)
		}
		m, err := c.masterOf(ctx, live[0], slot)
		if err != nil || m == "" {
			return "", fmt.Errorf("no master serves slot %d: %v", slot, err)
		}
		slots[m] = append(slots[m], slot)
	}
	var target string
	for m, s := range slots {
		if target == "" || len(s) > len(slots[target]) || (len(s) == len(slots[target]) && m < target) {
			target = m
		}
	}
	victim := -1
	for i, p := range c.ports {
		if "127.0.0.1:"+strconv.Itoa(p) == target {
			victim = i
		}
	}
	if victim < 0 {
		return "", fmt.Errorf("master %s is not one of ours", target)
	}
	c.mu.Lock()
	p := c.procs[victim]
	c.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return "", fmt.Errorf("kill master %s: %w", target, err)
	}
	<-p.exited
	p.halt()
	p.log.Close()
	killed := time.Now()
	what := fmt.Sprintf("master %s (%d of %d rooms)", target, len(slots[target]), len(rooms))
	if err := c.waitPromoted(ctx, victim, slots[target][0], target); err != nil {
		return what, err
	}
	what += fmt.Sprintf(", replica promoted after %s", time.Since(killed).Round(time.Millisecond))
	c.mu.Lock()
	c.restarts++
	name := fmt.Sprintf("redis-cluster%d-restart%d", victim, c.restarts)
	c.mu.Unlock()
	np, err := c.startNode(name, c.ports[victim])
	if err != nil {
		return what, fmt.Errorf("start the old master again: %w", err)
	}
	c.mu.Lock()
	c.procs[victim] = np
	c.mu.Unlock()
	return what, nil
}

// waitPromoted waits until another live node serves slot as its master.
func (c *redisCluster) waitPromoted(ctx context.Context, victim, slot int, old string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, i := range c.alive() {
			if i == victim {
				continue
			}
			if m, err := c.masterOf(ctx, i, slot); err == nil && m != "" && m != old {
				return nil
			}
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("no replica took over slot %d of the killed master %s within 30 s", slot, old)
}

func (c *redisCluster) stop() {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.shutdown(5 * time.Second)
	}
}
