//go:build linux

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	goredis "github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// startCluster starts n nodes sharing one Redis (or Redis Cluster) at url,
// or one NATS system when url is nats://.
func startCluster(t *testing.T, url string, n int, tweak func(*Config)) []*testServer {
	t.Helper()
	var nodes []*testServer
	for range n {
		nodes = append(nodes, startServer(t, func(c *Config) {
			if strings.HasPrefix(url, "nats://") {
				c.NATS.URL = url
			} else {
				c.Redis = url
			}
			c.RateLimit, c.RateBurst = 1000, 1000
			if tweak != nil {
				tweak(c)
			}
		}))
	}
	return nodes
}

// engines runs a test of what every cluster engine guarantees on one
// Redis, on a Redis Cluster of 3 masters and on NATS (one nats-server
// with JetStream, in-process): the suite both engines pass.
func engines(t *testing.T, test func(t *testing.T, url string)) {
	t.Run("redis", func(t *testing.T) { test(t, testsupport.StartRedis(t).URL()) })
	t.Run("redis-cluster", func(t *testing.T) { test(t, testsupport.StartRedisCluster(t, 3, 0).URL()) })
	t.Run("nats", func(t *testing.T) { test(t, testsupport.StartNATS(t)) })
}

// sendAcrossInOneOrder connects n clients to room x, client i on node i mod
// the nodes, has each send per messages, and checks that every client
// receives every message once, at seqs 1 on, in one order. It returns the
// clients.
func sendAcrossInOneOrder(t *testing.T, nodes []*testServer, n, per int) []*client {
	t.Helper()
	var cs []*client
	for i := range n {
		cs = append(cs, connect(t, nodes[i%len(nodes)], "x"))
	}
	for j := range per {
		for i, c := range cs {
			c.sendJSON(msg(fmt.Sprintf("%d-%d", i, j)))
		}
	}
	var first string
	for i, c := range cs {
		var texts []string
		for want := 1; want <= per*len(cs); want++ {
			m := c.next()
			if m["seq"] != float64(want) {
				t.Fatalf("client %d (node %d): want seq %d, got %v", i, i%len(nodes), want, m)
			}
			texts = append(texts, m["text"].(string))
		}
		if i == 0 {
			first = strings.Join(texts, ",")
		} else if strings.Join(texts, ",") != first {
			t.Fatalf("client %d saw another order", i)
		}
	}
	return cs
}

func TestClusterResumeOnAnotherNode(t *testing.T) { engines(t, testResumeOnAnotherNode) }

func testResumeOnAnotherNode(t *testing.T, url string) {
	nodes := startCluster(t, url, 2, func(c *Config) { c.History = 50 })
	writer := connect(t, nodes[0], "resume")
	reader := connect(t, nodes[0], "resume")
	for i := 1; i <= 5; i++ {
		writer.sendJSON(msg(fmt.Sprint(i)))
		writer.next()
		reader.next()
	}
	reader.conn.Close() // gone at seq 5
	for i := 6; i <= 9; i++ {
		writer.sendJSON(msg(fmt.Sprint(i)))
		writer.next()
	}
	// The reader comes back through the other node, which never had the room.
	back := dial(t, nodes[1].url("/ws/resume?since=5"))
	j, hist := back.joined()
	if j["seq"] != float64(9) {
		t.Errorf("joined %v", j)
	}
	var texts []string
	for _, m := range hist {
		texts = append(texts, m["text"].(string))
	}
	if strings.Join(texts, ",") != "6,7,8,9" {
		t.Errorf("replayed %v, want 6..9", texts)
	}
	writer.sendJSON(msg("10"))
	if m := back.next(); m["text"] != "10" || m["seq"] != float64(10) {
		t.Errorf("live after resume: %v", m)
	}
}

// TestClusterSurvivesRedisOutage: while Redis is down a room shared by two
// nodes is ordered by neither (a message is refused to its sender with
// unavailable, naming it, whether refused at once or given up in flight);
// Redis comes back without its data, so the room's stream is gone: every
// member is closed with 1012, resumes, is told reset, and the new stream's
// seqs never name a message of the old one.
func TestClusterSurvivesRedisOutage(t *testing.T) {
	redis := testsupport.StartRedis(t)
	nodes := startCluster(t, redis.URL(), 2, nil)
	a1 := dial(t, nodes[0].url("/ws/o"))
	j, _ := a1.joined()
	epoch := j["epoch"].(string)
	a2, b1 := connect(t, nodes[0], "o"), connect(t, nodes[1], "o")
	a1.sendJSON(msg("before"))
	for _, c := range []*client{a1, a2, b1} {
		if m := c.next(); m["text"] != "before" {
			t.Fatalf("got %v", m)
		}
	}

	redis.Stop()
	// Once node 0 knows Redis is away, it refuses the room: it owns it, but
	// node 1 follows it and would not get its messages.
	testsupport.Eventually(t, 10*time.Second, "node 0 to see Redis gone", func() bool {
		s, _ := nodes[0].BrokerStats()
		return !s.Up
	})
	a1.sendJSON(msg("during", "message_id", 7))
	if m := a1.next(); m["type"] != "error" || m["code"] != "unavailable" || m["message_id"] != float64(7) {
		t.Fatalf("during the outage the sender got %v, want an error unavailable naming message 7", m)
	}
	if _, body := httpGet(t, "http://"+nodes[0].addr+"/readyz", nil); !strings.Contains(body, "degraded") {
		t.Errorf("readyz during outage: %q", body)
	}

	redis.Restart()
	// The room's stream is gone from Redis: its members resume, none
	// having received "during" under a seq of node 0's own.
	for i, c := range []*client{a1, a2, b1} {
		for {
			f, err := c.readFrame(30 * time.Second)
			if err != nil {
				t.Fatalf("client %d: want close 1012, got %v", i, err)
			}
			if f.Header.OpCode == gws.OpClose {
				if code, _ := closeOf(f); code != 1012 {
					t.Errorf("client %d closed with %d, want 1012", i, code)
				}
				break
			}
			if strings.Contains(string(f.Payload), `"during"`) {
				t.Errorf("client %d received the refused message: %s", i, f.Payload)
			}
		}
	}
	testsupport.Eventually(t, 15*time.Second, "both nodes reconnected", func() bool {
		s0, _ := nodes[0].BrokerStats()
		s1, _ := nodes[1].BrokerStats()
		return s0.Up && s1.Up
	})
	resume := "/ws/o?since=1&epoch=" + epoch
	a1 = dial(t, nodes[0].url(resume))
	j, _ = a1.joined(true)
	if g := j["gap"].(map[string]any); g["reset"] != true || j["epoch"] == epoch {
		t.Errorf("resumed after the stream was lost: joined %v", j)
	}
	b1 = dial(t, nodes[1].url(resume))
	b1.joined(true)
	// Cross-node delivery is back, above every seq handed out.
	b1.sendJSON(msg("after"))
	for i, c := range []*client{a1, b1} {
		m := c.next()
		if m["text"] != "after" || m["seq"].(float64) <= 1 {
			t.Errorf("client %d after the outage: %v", i, m)
		}
	}
	if _, body := httpGet(t, "http://"+nodes[0].addr+"/readyz", nil); !strings.HasPrefix(body, "ready") {
		t.Errorf("readyz after outage: %q", body)
	}
}

// TestClusterRedisClusterMasterFailover: two nodes on a Redis Cluster (3
// masters with a replica each) share a room; the master of the room's slot
// is killed; once its replica took over, the nodes deliver across again,
// above every seq handed out, and the history written before the failover
// is still there for a client that joins after it.
func TestClusterRedisClusterMasterFailover(t *testing.T) {
	rc := testsupport.StartRedisCluster(t, 3, 1)
	nodes := startCluster(t, rc.URL(), 2, func(c *Config) { c.History = 100 })
	a, b := connect(t, nodes[0], "fo"), connect(t, nodes[1], "fo")
	for i := 1; i <= 5; i++ {
		a.sendJSON(msg(fmt.Sprint(i)))
		for _, c := range []*client{a, b} {
			if m := c.next(); m["seq"] != float64(i) {
				t.Fatalf("before the failover, message %d: %v", i, m)
			}
		}
	}
	// Everything written so far is on the replica before its master dies
	// (replication is asynchronous: a loaded machine lost the last writes
	// once, and the nodes rightly closed the room's members with 1012).
	master := rc.MasterOf("scalechat:{fo}:messages")
	if got, err := master.WaitReplicas(1, 10*time.Second); err != nil || got < 1 {
		t.Fatalf("the replica did not acknowledge the writes before the failover (%d, %v)", got, err)
	}
	master.Stop()
	rc.WaitHealthy(30 * time.Second)
	testsupport.Eventually(t, 30*time.Second, "both nodes back on the new master", func() bool {
		s0, _ := nodes[0].BrokerStats()
		s1, _ := nodes[1].BrokerStats()
		return s0.Up && s1.Up && s0.Reconnects > 0 && s1.Reconnects > 0
	})
	a.sendJSON(msg("after"))
	for i, c := range []*client{a, b} {
		m := c.next()
		if m["text"] != "after" || m["seq"].(float64) <= 5 {
			t.Fatalf("client %d after the failover: %v", i, m)
		}
	}
	late := dial(t, nodes[1].url("/ws/fo?since=0"))
	_, hist := late.joined()
	var texts []string
	for _, m := range hist {
		texts = append(texts, m["text"].(string))
	}
	if strings.Join(texts, ",") != "1,2,3,4,5,after" {
		t.Errorf("history after the failover: %v", texts)
	}
}

// TestClusterOwnedRoomTakenOverClosesItsMembers: a node owns a room (its
// only member is here) when another node takes it over behind its back (as
// while this one was stopped): its next write is refused, the room is
// dropped, and the member is closed with 1012; it comes back to the room's
// new stream, told with a reset.
func TestClusterOwnedRoomTakenOverClosesItsMembers(t *testing.T) {
	redis := testsupport.StartRedis(t)
	node := startCluster(t, redis.URL(), 1, nil)[0]
	c := dial(t, node.url("/ws/d"))
	j, _ := c.joined()
	epoch := j["epoch"].(string)
	// The node loaded the room first: it owns it and orders its messages.
	for i := 1; i <= 2; i++ {
		c.sendJSON(msg(fmt.Sprint(i)))
		if m := c.next(); m["seq"] != float64(i) {
			t.Fatalf("message %d: %v", i, m)
		}
	}
	if s, _ := node.BrokerStats(); s.Owned != 1 || s.OwnedPublished != 2 {
		t.Fatalf("broker stats %+v: want the room owned, its 2 messages ordered here", s)
	}
	// Another node took the room over: it holds it now, and listens.
	rdb := goredis.NewClient(&goredis.Options{Addr: redis.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "scalechat:{d}:holder", "othernode", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	other := rdb.Subscribe(ctx, "scalechat:{d}:messages")
	defer other.Close()
	if _, err := other.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	c.sendJSON(msg("3")) // ordered here, its write refused
	if code := c.expectClose(); code != 1012 {
		t.Fatalf("close code %d, want 1012", code)
	}
	j, _ = dial(t, node.url("/ws/d?since=3&epoch="+epoch)).joined(true)
	if g := j["gap"].(map[string]any); g["reset"] != true {
		t.Errorf("back in the room: %v, want a history_gap with reset", j)
	}
	if s, _ := node.BrokerStats(); s.Dropped != 1 || s.Takeovers != 1 {
		t.Errorf("broker stats %+v: want the room dropped, then taken over from the silent holder", s)
	}
}

// TestClusterOwnedRoomKeepsEveryMessage posts quickly into new rooms of a
// cluster node: each room comes to be ordered on the node while its first
// messages (a POST opens its room and publishes at once) are still on their
// way to the room's holder through Redis. Every message must keep its place:
// with the Redis order a message ordered on the node once took the seq Redis
// gave the one before it, which was then dropped as a duplicate.
func TestClusterOwnedRoomKeepsEveryMessage(t *testing.T) {
	rs := testsupport.StartRedis(t)
	nodes := startCluster(t, rs.URL(), 2, nil)
	const rooms, per = 30, 25
	for r := range rooms {
		room := fmt.Sprintf("fresh%d", r)
		for i := 1; i <= per; i++ {
			resp, err := http.Post("http://"+nodes[0].addr+"/rooms/"+room+"/messages", "application/json", strings.NewReader(fmt.Sprintf(`{"text":"m%d"}`, i)))
			if err != nil {
				t.Fatal(err)
			}
			why, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("post %d into %s: %d %s", i, room, resp.StatusCode, why)
			}
		}
	}
	for r := range rooms {
		room := fmt.Sprintf("fresh%d", r)
		var body struct {
			Seq      int
			Messages []struct {
				Seq  int
				Text string
			}
		}
		var last string // the last answer, printed if it never comes whole
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			code, b := httpGet(t, "http://"+nodes[0].addr+"/rooms/"+room+"/messages", nil)
			if code == 200 && json.Unmarshal([]byte(b), &body) == nil && body.Seq >= per {
				break
			}
			if last = fmt.Sprint(code, " ", b); time.Now().After(deadline) {
				st, _ := nodes[0].BrokerStats()
				t.Fatalf("%s's messages never reached seq %d on node 0: last answer %.600s; broker %+v", room, per, last, st)
			}
		}
		if body.Seq != per || len(body.Messages) != per {
			t.Errorf("%s: seq %d, %d messages, want %d", room, body.Seq, len(body.Messages), per)
		}
		for _, m := range body.Messages {
			if m.Text != fmt.Sprintf("m%d", m.Seq) {
				t.Errorf("%s: seq %d is %q", room, m.Seq, m.Text)
				break
			}
		}
	}
}

// TestClusterForwardLostInFlightIsRefusedToItsSender: a message lost in
// flight. Node 1 owns room f; node 0 follows it and sends
// its member's message on to it, and is cut off from Redis's answers
// after Redis carried the message: the owner orders and delivers it, but
// node 0 hears neither the owner's answer nor the message. The sender gets
// an error unavailable naming its message once the forward timed out
// (never silence, never a seq of node 0's own), and once node 0 reaches
// Redis again the message reaches the sender as well, under the seq the
// owner gave it: ambiguous, not silent.
func TestClusterForwardLostInFlightIsRefusedToItsSender(t *testing.T) {
	redis := testsupport.StartRedis(t)
	px := testsupport.NewProxy(t, redis.Addr())
	via := startCluster(t, "redis://"+px.Addr()+"/0", 1, nil)[0]
	direct := startCluster(t, redis.URL(), 1, nil)[0]
	b := connect(t, direct, "f") // the first to load the room: its owner
	a := connect(t, via, "f")
	sendThenStall(a, b, px)
	if m := b.next(); m["text"] != "amb" || m["seq"] != float64(2) {
		t.Fatalf("the owner's member got %v, want the message the owner ordered", m)
	}
	if m := a.next(); m["type"] != "error" || m["code"] != "unavailable" || m["message_id"] != float64(9) || m["room"] != "f" {
		t.Fatalf("the sender got %v, want an error unavailable naming message 9 of room f", m)
	}
	px.Refuse(true)
	px.Drop()
	px.Stall(false, false)
	px.Refuse(false)
	if m := a.next(); m["text"] != "amb" || m["seq"] != float64(2) {
		t.Errorf("after the return the sender got %v, want its message under seq 2", m)
	}
	// Once: a round sent again after its connection broke (go-redis's
	// retries) had the owner order it a second time, at seq 3.
	testsupport.Eventually(t, 10*time.Second, "node 0 back in step", func() bool {
		s, _ := via.BrokerStats()
		return s.Up
	})
	a.sendJSON(msg("next"))
	if m := a.next(); m["text"] != "next" || m["seq"] != float64(3) {
		t.Errorf("the next message: %v, want it at seq 3", m)
	}
}

// sendThenStall has a send "before", which a and b receive, then loses
// Redis's answers to a's node (through px) from then on, and has a send
// message 9, "amb".
func sendThenStall(a, b *client, px *testsupport.Proxy) {
	a.sendJSON(msg("before"))
	a.next()
	b.next()
	px.Stall(false, true)
	a.sendJSON(msg("amb", "message_id", 9, "room", "f"))
}
