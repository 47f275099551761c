package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// What the server API asks of the whole cluster: who is where (from the
// rooms' presence hashes, see redis_presence.go), and closing connections
// wherever they are (a message on the nodes' control channel).

var _ Cluster = (*Redis)(nil)

// controlChannel is where the nodes hear requests made to all of them.
// Its hash tag puts it in one slot of a Redis Cluster.
func (b *Redis) controlChannel() string { return b.cfg.Prefix + ":{control}:nodes" }

// Disconnect implements Cluster: the request goes to every node through the
// control channel; this node handles it when it hears it too.
func (b *Redis) Disconnect(ctx context.Context, d Disconnect) error {
	msg, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode a disconnect request: %w", err)
	}
	if b.cluster != nil {
		err = b.cluster.SPublish(ctx, b.controlChannel(), msg).Err()
	} else {
		err = b.rdb.Publish(ctx, b.controlChannel(), msg).Err()
	}
	if err != nil {
		return fmt.Errorf("send the disconnect request to the cluster: %w", err)
	}
	return nil
}

// controlLoop hears the control channel until ctx is done. The client
// library resubscribes by itself after a connection is lost.
func (b *Redis) controlLoop(ctx context.Context) {
	var ps *redis.PubSub
	if b.cluster != nil {
		ps = b.cluster.SSubscribe(ctx, b.controlChannel())
	} else {
		ps = b.rdb.Subscribe(ctx, b.controlChannel())
	}
	defer ps.Close()
	ch := ps.Channel(redis.WithChannelHealthCheckInterval(10 * time.Second))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			var d Disconnect
			if err := json.Unmarshal([]byte(m.Payload), &d); err != nil {
				// Not Redis failing: something else wrote on the channel.
				b.log.Warn("ignored a control message that is not a disconnect request", "err", err)
				continue
			}
			b.h.Disconnect(d)
		}
	}
}

// Occupancy implements Cluster: it reads the presence hashes of every
// room (or of one room), counting only the nodes whose lease is alive. It
// scans the keyspace (every master of a Redis Cluster) for all rooms: an
// operator's question, not one for every message.
func (b *Redis) Occupancy(ctx context.Context, room string) (map[string]map[string]int, error) {
	var keys []string
	if room != "" {
		keys = []string{b.presenceKey(room)}
	} else {
		var err error
		if keys, err = b.presenceKeys(ctx); err != nil {
			return nil, fmt.Errorf("list the rooms in Redis: %w", err)
		}
	}
	hashes := make([]*redis.MapStringStringCmd, len(keys))
	if len(keys) > 0 {
		_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				hashes[i] = p.HGetAll(ctx, k)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read presence from Redis: %w", err)
		}
	}
	type field struct {
		room, node, user string
		n                int
	}
	var fields []field
	nodes := map[string]bool{}
	for i, h := range hashes {
		name := strings.TrimSuffix(strings.TrimPrefix(keys[i], b.cfg.Prefix+":{"), "}:presence")
		for f, v := range h.Val() {
			node, user, ok := strings.Cut(f, "\x1f")
			n, err := strconv.Atoi(v)
			if !ok || err != nil || n <= 0 {
				continue
			}
			fields = append(fields, field{name, node, user, n})
			nodes[node] = true
		}
	}
	alive, err := b.aliveNodes(ctx, nodes)
	if err != nil {
		return nil, err
	}
	rooms := make(map[string]map[string]int)
	for _, f := range fields {
		if !alive[f.node] {
			continue
		}
		users := rooms[f.room]
		if users == nil {
			users = make(map[string]int)
			rooms[f.room] = users
		}
		users[f.user] += f.n
	}
	return rooms, nil
}

// presenceKeys returns the presence hash of every room, from every master.
func (b *Redis) presenceKeys(ctx context.Context) ([]string, error) {
	match := b.cfg.Prefix + ":{*}:presence"
	scan := func(ctx context.Context, c redis.Cmdable) ([]string, error) {
		var keys []string
		var cursor uint64
		for {
			page, next, err := c.Scan(ctx, cursor, match, 1000).Result()
			if err != nil {
				return nil, err
			}
			keys = append(keys, page...)
			if cursor = next; cursor == 0 {
				return keys, nil
			}
		}
	}
	if b.cluster == nil {
		return scan(ctx, b.rdb)
	}
	// Each master's scan runs in a goroutine of its own and hands its keys
	// over a channel: no lock. ForEachMaster returns once every scan has
	// sent, and err is read after found is closed.
	found := make(chan []string)
	var err error
	go func() {
		err = b.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			keys, err := scan(ctx, c)
			found <- keys
			return err
		})
		close(found)
	}()
	var all []string
	for keys := range found {
		all = append(all, keys...)
	}
	return all, err
}

// aliveNodes tells which of nodes hold a lease: the others are dead, and
// what they reported no longer counts.
func (b *Redis) aliveNodes(ctx context.Context, nodes map[string]bool) (map[string]bool, error) {
	alive := make(map[string]bool, len(nodes))
	if len(nodes) == 0 {
		return alive, nil
	}
	names := make([]string, 0, len(nodes))
	cmds := make([]*redis.IntCmd, 0, len(nodes))
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range nodes {
			names = append(names, n)
			cmds = append(cmds, p.Exists(ctx, b.leaseKey(n)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the nodes' leases from Redis: %w", err)
	}
	for i, n := range names {
		alive[n] = n == b.id || cmds[i].Val() != 0
	}
	return alive, nil
}
