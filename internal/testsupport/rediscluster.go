// Runs a real Redis Cluster (redis-server in cluster mode, created with
// redis-cli --cluster create) on loopback ports for tests.

package testsupport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// RedisCluster is a Redis Cluster of masters, each with replicas, owned by
// a test.
type RedisCluster struct {
	t     testing.TB
	Nodes []*Redis
}

// StartRedisCluster starts masters × (1 + replicas) redis-servers in
// cluster mode on free loopback ports, makes them one cluster with
// redis-cli, and waits until it serves every slot. A node is considered
// failed after 1 s without an answer, so a replica takes over a killed
// master within a few seconds. Skipped (or failed under CI) without
// redis-server.
func StartRedisCluster(t testing.TB, masters, replicas int) *RedisCluster {
	t.Helper()
	needRedis(t)
	c := &RedisCluster{t: t}
	for range masters * (1 + replicas) {
		port := clusterPort(t)
		s := &Redis{t: t, dir: t.TempDir(), port: port, extra: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0",
			"--repl-diskless-sync-delay", "0",
		}}
		s.Restart()
		t.Cleanup(s.Stop)
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		Eventually(t, 30*time.Second, "the cluster to serve every slot at "+n.Addr(), func() bool {
			return strings.Contains(n.cli("cluster", "info"), "cluster_state:ok")
		})
	}
	// A replica that has not finished its first sync cannot take over with
	// the data: wait until every master has its replicas online.
	for _, n := range c.Nodes {
		Eventually(t, 30*time.Second, "the replicas of "+n.Addr()+" to be in sync", func() bool {
			info := n.cli("info", "replication")
			if !strings.Contains(info, "role:master") {
				return true
			}
			return strings.Count(info, "state=online") == replicas
		})
	}
	return c
}

// URL returns the redis-cluster:// URL naming every node as a seed.
func (c *RedisCluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}

// MasterOf returns the node that is, now, the master of key's slot, as
// one of the live nodes sees it.
func (c *RedisCluster) MasterOf(key string) *Redis {
	c.t.Helper()
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		slot := strings.TrimSpace(n.cli("cluster", "keyslot", key))
		out := n.cli("cluster", "nodes")
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			for _, r := range f[8:] {
				lo, hi, _ := strings.Cut(r, "-")
				if hi == "" {
					hi = lo
				}
				if inRange(slot, lo, hi) {
					addr, _, _ := strings.Cut(f[1], "@")
					for _, m := range c.Nodes {
						if m.Addr() == addr {
							return m
						}
					}
				}
			}
		}
		c.t.Fatalf("no master serves slot %s of %q:\n%s", slot, key, out)
	}
	c.t.Fatal("no node of the cluster runs")
	return nil
}

// WaitHealthy waits until every running node says the cluster serves
// every slot (after a failover: a replica took over).
func (c *RedisCluster) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		Eventually(c.t, timeout, "the cluster to serve every slot again at "+n.Addr(), func() bool {
			return strings.Contains(n.cli("cluster", "info"), "cluster_state:ok")
		})
	}
}

func inRange(slot, lo, hi string) bool {
	var s, l, h int
	if _, err := fmt.Sscan(slot, &s); err != nil {
		return false
	}
	if _, err := fmt.Sscan(lo, &l); err != nil {
		return false
	}
	if _, err := fmt.Sscan(hi, &h); err != nil {
		return false
	}
	return l <= s && s <= h
}

// clusterPort returns a free loopback port below 45000 whose cluster bus
// port (port + 10000) is free too.
func clusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(25000)
		if free(p) && free(p+10000) {
			return p
		}
	}
	t.Fatal("no free port pair for a Redis Cluster node")
	return 0
}

func free(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
