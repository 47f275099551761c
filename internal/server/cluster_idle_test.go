//go:build linux

package server

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestClusterIdleRoomOutlivesItsTTL: a room shared by two nodes whose
// members stay connected while nobody writes for longer than --redis-ttl
// goes on where it was: its history in Redis expires, as the TTL says, but
// its counter and epoch live while nodes have the room, so the next message
// reaches every member under the next seq (it used to get seq 1 of a new
// stream, which every node dropped as a message it had).
func TestClusterIdleRoomOutlivesItsTTL(t *testing.T) {
	redis := testsupport.StartRedis(t)
	nodes := startCluster(t, redis.URL(), 2, func(c *Config) { c.RedisTTL = 2 * time.Second })
	a := connect(t, nodes[0], "idle")
	b := connect(t, nodes[1], "idle")
	sendAcross(a, b, "1", "2", "3")
	rdb := redisClient(t, redis)
	ctx := context.Background()
	// The owner writes the history behind (--history-linger); it expires
	// after the TTL (and its quarter) without messages.
	testsupport.Eventually(t, 10*time.Second, "the room's history written", func() bool {
		n, err := rdb.Exists(ctx, "scalechat:{idle}:history").Result()
		return err == nil && n == 1
	})
	testsupport.Eventually(t, 10*time.Second, "the room's history to expire", func() bool {
		n, err := rdb.Exists(ctx, "scalechat:{idle}:history").Result()
		return err == nil && n == 0
	})
	for _, k := range []string{"seq", "epoch", "nodes"} {
		if ttl, err := rdb.TTL(ctx, "scalechat:{idle}:"+k).Result(); err != nil || ttl <= 0 {
			t.Errorf("the room's %s key: TTL %v (%v), want it kept alive while loaded", k, ttl, err)
		}
	}
	a.sendJSON(msg("after"))
	for name, c := range map[string]*client{"a": a, "b": b} {
		if m := c.next(); m["text"] != "after" || m["seq"] != float64(4) {
			t.Errorf("member %s after the idle TTL: %v, want \"after\" at seq 4", name, m)
		}
	}
}

// sendAcross has a send each text and waits until a and b received it.
func sendAcross(a, b *client, texts ...string) {
	for _, text := range texts {
		a.sendJSON(msg(text))
		a.next()
		b.next()
	}
}

// redisClient is a client of r, closed when the test ends.
func redisClient(t *testing.T, r *testsupport.Redis) *goredis.Client {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
