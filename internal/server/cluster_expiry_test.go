//go:build linux

package server

import (
	"context"
	"testing"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestClusterRoomWhoseKeysWentStartsAnew: a room shared by two nodes loses
// its keys in Redis while both keep it loaded (they expired, or were
// flushed). The new stream hands out seqs 1, 2 … again, which the nodes
// hold already: they must not take its messages for ones they have (they
// used to, and dropped every one in silence). Whether the next publish
// (whose write the owner finds refused) or another node's load starts the
// new stream, every member is closed with 1012 and, resuming with the old
// epoch, is told reset and gets the new stream's history.
func TestClusterRoomWhoseKeysWentStartsAnew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		publish bool // the next publish starts the new stream; else a third node's load
	}{
		{"the next publish", true},
		{"another node loading the room", false},
	} {
		for _, kind := range []string{"redis", "redis-cluster"} {
			t.Run(kind+", "+tc.name, func(t *testing.T) {
				testKeysWent(t, kind, tc.publish)
			})
		}
	}
}

// testKeysWent runs the test on one Redis or on a Redis Cluster (where the
// control message goes on the room's shard channel).
func testKeysWent(t *testing.T, kind string, publish bool) {
	var url string
	var redis *testsupport.Redis // the one Redis, or the master of the room's keys
	if kind == "redis" {
		redis = testsupport.StartRedis(t)
		url = redis.URL()
	} else {
		rc := testsupport.StartRedisCluster(t, 3, 0)
		url, redis = rc.URL(), rc.MasterOf("scalechat:{k}:seq")
	}
	nodes := startCluster(t, url, 3, nil)
	a := dial(t, nodes[0].url("/ws/k"))
	j, _ := a.joined()
	epoch := j["epoch"].(string)
	b := connect(t, nodes[1], "k")
	sendAcross(a, b, "1", "2", "3")
	rdb := redisClient(t, redis)
	var keys []string
	for _, k := range []string{"seq", "history", "epoch", "holder", "nodes"} {
		keys = append(keys, "scalechat:{k}:"+k)
	}
	if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if publish {
		a.sendJSON(msg("after"))
	} else {
		connect(t, nodes[2], "k")
	}
	for name, c := range map[string]*client{"a": a, "b": b} {
		texts, code := c.textsUntilClose()
		if code != 1012 {
			t.Fatalf("member %s closed with %d, want 1012 (resume)", name, code)
		}
		// Node 0 owns the room: it ordered "after" in the old stream and
		// delivered it; its write was refused, and it dropped the room.
		if publish && (len(texts) != 1 || texts[0] != "after") {
			t.Errorf("member %s got %v before its close, want \"after\"", name, texts)
		}
	}
	resume := "/ws/k?since=3&epoch=" + epoch
	a = dial(t, nodes[0].url(resume))
	j, hist := a.joined(true)
	if g := j["gap"].(map[string]any); g["reset"] != true || j["epoch"] == epoch {
		t.Fatalf("resumed into the new stream: joined %v, gap %v", j, g)
	}
	if len(hist) != 0 {
		t.Errorf("the new stream's history: %v, want none", hist)
	}
	b = dial(t, nodes[1].url(resume))
	b.joined(true)
	b.sendJSON(msg("next"))
	for name, c := range map[string]*client{"a": a, "b": b} {
		if m := c.next(); m["text"] != "next" {
			t.Errorf("member %s after resuming: %v", name, m)
		}
	}
}
