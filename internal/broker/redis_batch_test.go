package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// evalshaCalls is how many EVALSHA calls Redis has served, from INFO
// commandstats.
func evalshaCalls(t testing.TB, n *node) int {
	t.Helper()
	info, err := n.b.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls=")
		if !ok {
			continue
		}
		calls, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatal(err)
		}
		return calls
	}
	return 0
}

// The publishes of one round go to Redis in one script call, and each is
// ordered as if alone: one order per room on every node, and seqs 1..n.
func TestRedisPublishesOfARoundShareAScriptCall(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a, b := startNode(t, rs.URL(), 100), startNode(t, rs.URL(), 100)
	rooms := []string{"r0", "r1", "r2", "r3"}
	for _, r := range rooms {
		a.join(t, r)
		b.join(t, r) // on both nodes: nobody owns it, Redis orders every message
	}
	before := evalshaCalls(t, a)
	const each = 5
	for i := range each {
		for _, r := range rooms {
			a.publish(r, fmt.Sprintf("%s-%d", r, i))
		}
	}
	sameOrderOnBoth(t, a, b, rooms, each)
	// 20 messages queued at once go out in a round or two (the first may
	// leave before the last is queued), not in 20 calls.
	if calls := evalshaCalls(t, a) - before; calls > 4 {
		t.Errorf("%d script calls for %d messages queued at once: not batched", calls, each*len(rooms))
	}
	// A message may come back on a's channel before a read Redis's answer
	// to its call: the count follows.
	testsupport.Eventually(t, 5*time.Second, fmt.Sprintf("node a to count %d published", each*len(rooms)), func() bool {
		return a.b.Stats().Published == uint64(each*len(rooms))
	})
}

// A node's publishes renew a room's TTLs once per renewInterval, not with
// every message; a publish after the interval renews them again.
func TestRedisPublishRenewsTTLsOncePerInterval(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a, b := startNode(t, rs.URL(), 100), startNode(t, rs.URL(), 100)
	a.join(t, "r")
	b.join(t, "r")
	ctx := context.Background()
	ttl := func() time.Duration { return a.b.rdb.TTL(ctx, a.b.seqKey("r")).Val() }
	a.publish("r", "m1")
	a.hasSeq(t, "r", 1)
	if got := ttl(); got < 50*time.Minute {
		t.Fatalf("the first publish left the seq's TTL at %v, want the hour of the config", got)
	}
	if err := a.b.rdb.Expire(ctx, a.b.seqKey("r"), 100*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	a.publish("r", "m2")
	a.hasSeq(t, "r", 2)
	if got := ttl(); got > 100*time.Second || got <= 0 {
		t.Errorf("a publish within the interval set the TTL to %v, want it left at ≤ 100s", got)
	}
	a.b.subMu.Lock()
	a.b.rooms["r"].renewed = time.Now().Add(-renewInterval(a.b.rooms["r"].rc.TTL))
	a.b.subMu.Unlock()
	a.publish("r", "m3")
	a.hasSeq(t, "r", 3)
	if got := ttl(); got < 50*time.Minute {
		t.Errorf("a publish after the interval left the TTL at %v, want it renewed to the hour", got)
	}
}

// BenchmarkRedisPublishSpanning is the path of a room whose members sit on
// two nodes, against a real redis-server: a message published on one node
// is ordered by Redis and delivered on both. One op is one message.
func BenchmarkRedisPublishSpanning(b *testing.B) {
	rs := testsupport.StartRedis(b)
	na, nb := startNode(b, rs.URL(), 100), startNode(b, rs.URL(), 100)
	rooms := make([]string, 16)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("r%d", i)
		na.join(b, rooms[i])
		nb.join(b, rooms[i])
	}
	before := evalshaCalls(b, na)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		na.publish(rooms[i%len(rooms)], "m")
	}
	for i, r := range rooms {
		want := uint64(b.N / len(rooms))
		if i < b.N%len(rooms) {
			want++
		}
		nb.hasSeq(b, r, want)
	}
	b.StopTimer()
	b.ReportMetric(float64(evalshaCalls(b, na)-before)/float64(b.N), "calls/msg")
}

// On a Redis Cluster a round's publishes are batched per hash slot: the
// messages of one room share a call, rooms of other slots go in their own,
// and each room keeps one order on every node.
func TestRedisClusterBatchesPublishesPerSlot(t *testing.T) {
	rc := testsupport.StartRedisCluster(t, 3, 0)
	a, b := startNode(t, rc.URL(), 100), startNode(t, rc.URL(), 100)
	rooms := []string{"r0", "r1", "r2", "r3", "r4", "r5"}
	for _, r := range rooms {
		a.join(t, r)
		b.join(t, r)
	}
	const each = 3
	for i := range each {
		for _, r := range rooms {
			a.publish(r, fmt.Sprintf("%s-%d", r, i))
		}
	}
	sameOrderOnBoth(t, a, b, rooms, each)
	if s := a.b.Stats(); s.Refused != 0 {
		t.Errorf("node a refused %d publishes: a call crossed slots?", s.Refused)
	}
}

// sameOrderOnBoth waits until both nodes have each room's first each
// messages, published by a as "ROOM-I", and checks they hold them in the
// same order, seq i+1 for message i.
func sameOrderOnBoth(t *testing.T, a, b *node, rooms []string, each int) {
	t.Helper()
	for _, r := range rooms {
		a.hasSeq(t, r, uint64(each))
		b.hasSeq(t, r, uint64(each))
		pa, pb := a.h.payloads(r), b.h.payloads(r)
		if !slices.Equal(pa, pb) || len(pa) != each {
			t.Fatalf("room %s: the nodes disagree:\n a %q\n b %q", r, pa, pb)
		}
		for i, p := range pa {
			if want := fmt.Sprintf("%d:%s-%d#", i+1, r, i); !strings.HasPrefix(p, want) {
				t.Errorf("room %s message %d is %q, want %q…", r, i, p, want)
			}
		}
	}
}
