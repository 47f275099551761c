//go:build linux

package server

import (
	"fmt"
	"testing"
	"time"

	gws "github.com/gobwas/ws"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// fill sends n messages to room on ts and waits for their echoes, and
// returns the room's epoch.
func fill(t *testing.T, ts *testServer, room string, n int) string {
	t.Helper()
	c := dial(t, ts.url("/ws/"+room))
	j, _ := c.joined()
	for i := range n {
		c.sendJSON(msg(fmt.Sprint(i)))
		c.next()
	}
	c.sendRaw(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, "")))
	c.expectClose()
	return j["epoch"].(string)
}

// The fault of issue 18: a room freed and made anew restarts its seqs; a
// client that saw seq 5 of the old stream and resumes at since=2 of it
// must not be replayed 3.. of the new one as if nothing happened.
func TestResumeInAnotherStreamGetsTheWholeHistory(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RoomGrace = 20 * time.Millisecond })
	old := fill(t, ts, "e", 5)
	testsupport.Eventually(t, 5*time.Second, "the room to be freed", func() bool { return ts.Stats().Rooms == 0 })
	current := fill(t, ts, "e", 3) // seqs 1..3 of a new stream
	if current == old || current == "" {
		t.Fatalf("epochs %q then %q: a new stream needs a new epoch", old, current)
	}
	keep := dial(t, ts.url("/ws/e")) // keeps the room alive for the resumes below
	keep.joined()

	for _, tt := range []struct {
		name  string
		query string
		gap   bool
		first float64 // seq of the first replayed message
		n     int
	}{
		{"since of the old stream", "?since=2&epoch=" + old, true, 1, 3},
		{"since beyond the new stream", "?since=5&epoch=" + old, true, 1, 3},
		{"since of the current stream", "?since=2&epoch=" + current, false, 3, 1},
		{"no epoch: as before epochs", "?since=2", false, 3, 1},
	} {
		c := dial(t, ts.url("/ws/e"+tt.query))
		j, hist := c.joined(tt.gap)
		if j["epoch"] != current || len(hist) != tt.n || hist[0]["seq"] != tt.first {
			t.Errorf("%s: joined %v, replay %v", tt.name, j, hist)
		}
		if tt.gap && (j["gap"].(map[string]any)["reset"] != true) {
			t.Errorf("%s: history_gap without reset: %v", tt.name, j["gap"])
		}
		a, code := poll(t, ts.addr, "e", tt.query)
		if code != 200 || a.Epoch != current || len(a.Messages) != tt.n || (a.HistoryGap != nil) != tt.gap {
			t.Errorf("%s: poll %d %+v", tt.name, code, a)
		}
	}
	// The same with a join frame on another connection.
	other := connect(t, ts, "lobby")
	other.sendJSON(map[string]any{"type": "join", "room": "e", "since": 2, "epoch": old})
	j, hist := other.joined(true)
	if j["epoch"] != current || len(hist) != 3 {
		t.Errorf("join frame: %v %v", j, hist)
	}
	for _, bad := range []string{"?since=1&epoch=not-an-epoch", "?since=1&epoch=" + fmt.Sprintf("%040d", 0)} {
		if code, _ := httpGet(t, "http://"+ts.addr+"/ws/e"+bad, nil); code != 400 {
			t.Errorf("%s: HTTP %d, want 400", bad, code)
		}
	}
}

// In a cluster the epoch is stored in Redis with the stream: every node
// names the same stream alike, a node restart keeps it, and a Redis that
// lost its data is a new stream.
func TestEpochAcrossNodes(t *testing.T) {
	redis := testsupport.StartRedis(t)
	nodes := startCluster(t, redis.URL(), 2, nil)
	a := connect(t, nodes[0], "shared")
	a.sendJSON(msg("one"))
	a.next()
	ja, _ := dial(t, nodes[0].url("/ws/shared")).joined()
	jb, _ := dial(t, nodes[1].url("/ws/shared")).joined()
	if ja["epoch"] == "" || ja["epoch"] != jb["epoch"] {
		t.Fatalf("node A names the stream %v, node B %v", ja["epoch"], jb["epoch"])
	}
	// A node started afterwards (a restart) loads the same epoch.
	late := startCluster(t, redis.URL(), 1, nil)[0]
	jl, hist := dial(t, late.url("/ws/shared?since=0&epoch="+ja["epoch"].(string))).joined()
	if jl["epoch"] != ja["epoch"] || len(hist) != 1 {
		t.Errorf("a new node: %v %v", jl, hist)
	}
	// Redis loses everything (restarted without persistence): the rooms a
	// node loads from now on are new streams.
	redis.Stop()
	redis.Restart()
	fresh := startCluster(t, redis.URL(), 1, nil)[0]
	testsupport.Eventually(t, 15*time.Second, "the new node to reach Redis", func() bool {
		st, cluster := fresh.BrokerStats()
		return cluster && st.Up
	})
	c := dial(t, fresh.url("/ws/shared?since=1&epoch="+ja["epoch"].(string)))
	jf, _ := c.joined(true)
	if jf["epoch"] == ja["epoch"] || jf["gap"].(map[string]any)["reset"] != true {
		t.Errorf("after Redis lost the stream: %v", jf)
	}
}
