//go:build linux

package server

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestClusterDeliversAcrossNodesInOneOrder: a room with members on three
// nodes is ordered by the node that loaded it first; the others follow it
// and send their publishes on to it. Every member sees every message once,
// in the same order, and every message was ordered by an owner (no script
// in Redis gave a seq). On a Redis Cluster the records between nodes go on
// their shard channels.
func TestClusterDeliversAcrossNodesInOneOrder(t *testing.T) {
	engines(t, testDeliversAcrossNodes)
}

func testDeliversAcrossNodes(t *testing.T, url string) {
	nodes := startCluster(t, url, 3, nil)
	const per = 30
	cs := sendAcrossInOneOrder(t, nodes, 6, per)
	var owned, forwarded uint64
	for i, n := range nodes {
		st, _ := n.BrokerStats()
		owned += st.OwnedPublished
		forwarded += st.Published
		if !st.Up || st.Rooms != 1 {
			t.Errorf("node %d broker: %+v", i, st)
		}
	}
	if owned != per*uint64(len(cs)) || forwarded != per*4 {
		t.Errorf("ordered by owners %d, forwarded and answered %d; want %d and %d", owned, forwarded, per*len(cs), per*4)
	}
	// Presence counts the room's connections on every node (and those
	// announced already: the messages above came after every join).
	cs[0].sendJSON(map[string]any{"type": "presence", "room": "x"})
	if p := cs[0].nextOfType("presence"); p["members"] != float64(len(cs)) || p["anonymous"] != float64(len(cs)) {
		t.Errorf("presence on node 0: %v, want %d members over 3 nodes", p, len(cs))
	}
}

// TestClusterOwnerHandsTheRoomToAFollower: an owner whose members left
// hands the room to a node that follows it: the stream goes on with the
// next seq, under the same epoch, and the new owner orders it. On a Redis
// Cluster the owner tells the nodes itself once the handover script
// answered.
func TestClusterOwnerHandsTheRoomToAFollower(t *testing.T) {
	engines(t, testOwnerHandsTheRoomToAFollower)
}

func testOwnerHandsTheRoomToAFollower(t *testing.T, url string) {
	nodes := startCluster(t, url, 2, func(c *Config) { c.RoomGrace = 20 * time.Millisecond; c.History = 50 })
	a := connect(t, nodes[0], "h") // first: node 0 owns the room
	b := dial(t, nodes[1].url("/ws/h"))
	jb, _ := b.joined()
	a.sendJSON(msg("1"))
	b.sendJSON(msg("2"))
	for _, c := range []*client{a, b} {
		for want := 1; want <= 2; want++ {
			if m := c.next(); m["seq"] != float64(want) {
				t.Fatalf("want seq %d, got %v", want, m)
			}
		}
	}
	a.conn.Close()
	testsupport.Eventually(t, 10*time.Second, "the room handed to node 1", func() bool {
		s, _ := nodes[1].BrokerStats()
		return s.Owned == 1
	})
	b.sendJSON(msg("3"))
	if m := b.next(); m["seq"] != float64(3) || m["text"] != "3" {
		t.Fatalf("after the handover: %v", m)
	}
	if s, _ := nodes[1].BrokerStats(); s.OwnedPublished != 1 {
		t.Errorf("node 1 broker %+v: want the message ordered there", s)
	}
	back := dial(t, nodes[0].url("/ws/h?since=1&epoch="+jb["epoch"].(string)))
	j, hist := back.joined()
	if j["epoch"] != jb["epoch"] || len(hist) != 2 || hist[1]["text"] != "3" {
		t.Errorf("back on node 0: %v %v, want seqs 2 and 3 of the same stream", j, hist)
	}
}

// TestClusterOwnerOrderTakesOverADeadOwner: a room whose holder has no
// lease (a node that died) is taken over by the next node that loads it,
// after the holder did not answer: a new epoch, and a member resuming from
// the old one is told reset.
func TestClusterOwnerOrderTakesOverADeadOwner(t *testing.T) {
	rs := testsupport.StartRedis(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: rs.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	for k, v := range map[string]string{"scalechat:{g}:holder": "ghost", "scalechat:{g}:seq": "7", "scalechat:{g}:epoch": "oldepoch"} {
		if err := rdb.Set(ctx, k, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	node := startCluster(t, rs.URL(), 1, nil)[0]
	c := dial(t, node.url("/ws/g?since=7&epoch=oldepoch"))
	j, _ := c.joined(true)
	if g, _ := j["gap"].(map[string]any); g["reset"] != true || j["epoch"] == "oldepoch" {
		t.Fatalf("joined %v: want a new epoch and reset", j)
	}
	c.sendJSON(msg("after"))
	if m := c.next(); m["seq"] != float64(8) {
		t.Fatalf("first message of the new owner: %v", m)
	}
	if s, _ := node.BrokerStats(); s.Takeovers != 1 || s.OwnedPublished != 1 {
		t.Errorf("broker %+v: want one takeover and the message ordered here", s)
	}
}
