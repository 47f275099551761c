//go:build linux

package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// natsRoomLive sends from the client at "from" until a message gets
// through to every client of cs (an outage or an election may refuse the
// first ones: unavailable), and returns the seq it got. Each client must
// see the seqs of the room one after the other, from *last on, in one
// stream: no seq skipped, none twice.
func natsRoomLive(t *testing.T, from *client, cs []*client, last []float64, what string) float64 {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no message got through in 40s", what)
		}
		text := fmt.Sprintf("%s-%d", what, i)
		from.sendJSON(msg(text))
		m := chatOrError(from)
		if m["type"] == "error" {
			time.Sleep(250 * time.Millisecond) // refused while the cluster recovers: send again
			continue
		}
		seq := m["seq"].(float64)
		for k, c := range cs {
			got := m
			if c != from {
				got = chatOrError(c)
			}
			if got["text"] != text || got["seq"] != last[k]+1 {
				t.Fatalf("%s: client %d got %v after seq %v, want %q at seq %v", what, k, got, last[k], text, last[k]+1)
			}
			last[k] = got["seq"].(float64)
		}
		return seq
	}
}

// chatOrError reads c's next chat message (no type) or error, skipping
// other frames (presence).
func chatOrError(c *client) map[string]any {
	c.t.Helper()
	for {
		if m := c.next(); m["type"] == nil || m["type"] == "error" {
			return m
		}
	}
}

// TestClusterOnNATSSurvivesAServerOfThreeKilled: two nodes on a NATS
// cluster of three (the real binary, JetStream replicas 3); one server is
// SIGKILLed. The nodes reconnect to the others, JetStream elects new
// leaders, and the room goes on in the same stream: every message that got
// a seq reached every member once, in order, whatever was refused meanwhile.
func TestClusterOnNATSSurvivesAServerOfThreeKilled(t *testing.T) {
	ps := testsupport.StartNATSCluster(t, 3)
	nodes := startCluster(t, testsupport.ClusterURL(ps), 2, func(c *Config) { c.NATS.Replicas = 3; c.History = 50 })
	a := dial(t, nodes[0].url("/ws/k"))
	ja, _ := a.joined()
	b := dial(t, nodes[1].url("/ws/k"))
	jb, _ := b.joined()
	if ja["epoch"] != jb["epoch"] {
		t.Fatalf("two streams: %v %v", ja, jb)
	}
	cs := []*client{a, b}
	last := []float64{0, 0}
	natsRoomLive(t, b, cs, last, "before")
	ps[0].Kill()
	natsRoomLive(t, b, cs, last, "after-b")
	natsRoomLive(t, a, cs, last, "after-a")
}

// TestClusterOnNATSServerRestarted: the one NATS server of two nodes stops
// and starts again with its store (JetStream's records and history kept).
// Meanwhile the room refuses messages (unavailable); after it, the node
// that follows the room catches up from its owner's snapshot: its member
// misses nothing that got a seq, in the same stream.
func TestClusterOnNATSServerRestarted(t *testing.T) {
	p := testsupport.StartNATSProcess(t)
	nodes := startCluster(t, p.URL(), 2, func(c *Config) { c.History = 50 })
	a := dial(t, nodes[0].url("/ws/q"))
	a.joined()
	b := dial(t, nodes[1].url("/ws/q"))
	b.joined()
	last := []float64{0, 0}
	natsRoomLive(t, b, []*client{a, b}, last, "before")

	p.Stop()
	testsupport.Eventually(t, 10*time.Second, "node 1 to see NATS gone", func() bool {
		s, _ := nodes[1].BrokerStats()
		return !s.Up
	})
	b.sendJSON(msg("during", "message_id", 9))
	if m := chatOrError(b); m["type"] != "error" || m["code"] != "unavailable" {
		t.Fatalf("during the outage the sender got %v, want an error unavailable", m)
	}
	p.Start()
	testsupport.Eventually(t, 15*time.Second, "both nodes reconnected", func() bool {
		s0, _ := nodes[0].BrokerStats()
		s1, _ := nodes[1].BrokerStats()
		return s0.Up && s1.Up
	})
	// Node 1 follows the room: it asks the owner for its snapshot again
	// and catches up from it; its member stays.
	natsRoomLive(t, b, []*client{a, b}, last, "after")
}
