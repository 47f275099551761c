package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Redis Cluster spreads rooms over its masters by hash slot. Every key of
// a room carries the room in a hash tag ({room}), so the room's seq, stream
// and epoch live in one slot and its scripts run on one master; its control
// messages go out with SPUBLISH on a shard channel of the same slot, so
// they cross only the master that owns the room (and its replicas), and
// each node's channel is a shard channel too. A node keeps
// one subscription connection per master, for the rooms of that master's
// slots; when slots move (a failover, a resharding) the node resubscribes
// each room where it now lives and catches up from its stream.

// clusterScheme is the URL scheme of a Redis Cluster:
// redis-cluster://[user:password@]host:port[,host:port...].
const clusterScheme = "redis-cluster"

// isClusterURL reports whether u names a Redis Cluster.
func isClusterURL(u string) bool { return strings.HasPrefix(u, clusterScheme+"://") }

// parseClusterURL reads a redis-cluster:// URL: the seed nodes, and the
// user and password shared by every node.
func parseClusterURL(raw string) (*redis.ClusterOptions, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != clusterScheme {
		return nil, fmt.Errorf("scheme %q is not %s", u.Scheme, clusterScheme)
	}
	if u.Path != "" && u.Path != "/" && u.Path != "/0" {
		return nil, errors.New("a Redis Cluster has database 0 only")
	}
	opts := &redis.ClusterOptions{}
	for _, a := range strings.Split(u.Host, ",") {
		if a == "" {
			continue
		}
		if !strings.Contains(a, ":") {
			a += ":6379"
		}
		opts.Addrs = append(opts.Addrs, a)
	}
	if len(opts.Addrs) == 0 {
		return nil, errors.New("no node address")
	}
	if u.User != nil {
		opts.Username = u.User.Username()
		opts.Password, _ = u.User.Password()
	}
	opts.DialTimeout = time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	opts.MaxRetries = 0 // a failed publish falls back to local delivery at once
	// One dial per attempt: go-redis otherwise dials a dead node 5 times,
	// 100 ms apart, and that half second ate the 1 s health check of a node
	// started while one seed was down (it then served its rooms alone).
	// healthLoop retries, with backoff, at the broker's level.
	opts.DialerRetries = 1
	opts.PoolSize = 8
	opts.Dialer = rawDialer(opts.DialTimeout, opts.TLSConfig != nil)
	opts.Protocol = respVersion
	return opts, nil
}

// slotRange is a range of hash slots and the master that serves them.
type slotRange struct {
	start, end int
	addr       string
}

// slotMap says which master serves each slot.
type slotMap []slotRange

// master returns the address of the master serving key's slot, or "".
func (m slotMap) master(key string) string {
	s := keySlot(key)
	i := sort.Search(len(m), func(i int) bool { return m[i].end >= s })
	if i < len(m) && m[i].start <= s {
		return m[i].addr
	}
	return ""
}

// clusterSlots reads the slot map of the cluster (CLUSTER SHARDS, Redis 7).
func clusterSlots(ctx context.Context, c *redis.ClusterClient) (slotMap, error) {
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("read the cluster's slots: %w", err)
	}
	var m slotMap
	for _, sh := range shards {
		addr := ""
		for _, n := range sh.Nodes {
			if n.Role == "master" && n.Health == "online" {
				host := n.Endpoint
				if host == "" || host == "?" {
					host = n.IP
				}
				addr = net.JoinHostPort(host, strconv.FormatInt(n.Port, 10))
			}
		}
		if addr == "" {
			continue // a shard without a live master serves no slot now
		}
		for _, r := range sh.Slots {
			m = append(m, slotRange{start: int(r.Start), end: int(r.End), addr: addr})
		}
	}
	sort.Slice(m, func(i, j int) bool { return m[i].start < m[j].start })
	return m, nil
}

// clusterHealthy reports whether the cluster serves every slot and each of
// its masters answers.
func clusterHealthy(ctx context.Context, c *redis.ClusterClient) error {
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("cluster info: %w", err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("the cluster does not serve every slot")
	}
	return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	})
}

// keySlot is Redis Cluster's hash slot of a key: CRC16 (XMODEM) of the key,
// or of its hash tag (the text between the first { and the next }, when not
// empty), modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// bySlot groups channels by hash slot: SSUBSCRIBE takes the channels of
// one slot at a time.
func bySlot(channels []string) [][]string {
	groups := map[int][]string{}
	for _, c := range channels {
		s := keySlot(c)
		groups[s] = append(groups[s], c)
	}
	out := make([][]string, 0, len(groups))
	for _, g := range groups {
		out = append(out, g)
	}
	return out
}

// clientRoutes checks that the cluster client sends each room's commands
// to the master that serves the room now: after a failover its view of the
// slots is reloaded in the background, and a node that came back up before
// it would send its publishes to the dead master.
func (b *Redis) clientRoutes(ctx context.Context) error {
	b.cluster.ReloadState(ctx)
	m, err := clusterSlots(ctx, b.cluster)
	if err != nil {
		return err
	}
	rooms := b.sub.names()
	channels := make([]string, 0, len(rooms))
	for _, name := range rooms {
		channels = append(channels, b.channel(name))
	}
	checked := map[string]bool{} // one room per master is enough
	for _, ch := range channels {
		want := m.master(ch)
		if want == "" || checked[want] {
			continue
		}
		c, err := b.cluster.MasterForKey(ctx, ch)
		if err != nil {
			return err
		}
		if got := c.Options().Addr; got != want {
			return fmt.Errorf("the cluster client still sends to %s what %s serves now", got, want)
		}
		checked[want] = true
	}
	return nil
}
