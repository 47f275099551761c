//go:build linux

package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/client"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// cluster is nodes sharing one Redis behind a load balancer.
type cluster struct {
	redis *testsupport.Redis
	nodes []*testsupport.Node
	lb    *testsupport.LoadBalancer
}

func startNodes(t *testing.T, redis *testsupport.Redis, n int, flags ...string) []*testsupport.Node {
	t.Helper()
	var nodes []*testsupport.Node
	for i := range n {
		args := append([]string{"--redis", redis.URL(), "--history", "1000", "--rate-limit", "1000", "--rate-burst", "1000",
			"--shutdown-timeout", "5s"}, flags...)
		nodes = append(nodes, testsupport.StartNode(t, bin, fmt.Sprintf("node%d", i+1), args...))
	}
	return nodes
}

// startHAProxyCluster starts n nodes with flags besides the tests' own,
// one Redis and HAProxy in front of them.
func startHAProxyCluster(t *testing.T, n int, flags ...string) *cluster {
	t.Helper()
	testsupport.Need(t, "haproxy", "haproxy")
	redis := testsupport.StartRedis(t)
	nodes := startNodes(t, redis, n, flags...)
	lb := testsupport.StartHAProxy(t, repoFile(t, "deploy/haproxy/haproxy.cfg"), nodes)
	return &cluster{redis: redis, nodes: nodes, lb: lb}
}

// hostOf returns the index of the only node with more than probe's own
// membership in room, failing when members are spread over several nodes.
func (c *cluster) hostOf(t *testing.T, room string, want int) int {
	t.Helper()
	host := -1
	for i, n := range c.nodes {
		m, err := testsupport.Members(context.Background(), n, room)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m == want+1:
			if host >= 0 {
				t.Fatalf("room %s: nodes %d and %d both hold %d members", room, host+1, i+1, want)
			}
			host = i
		case m != 1:
			t.Fatalf("room %s: node%d holds %d members besides the probe, want 0 or %d", room, i+1, m-1, want)
		}
	}
	if host < 0 {
		t.Fatalf("room %s: no node holds its %d members", room, want)
	}
	return host
}

// keepsRoomsOnOneNode connects clients of several rooms through the load
// balancer, with and without query strings, and checks that each room's
// members all landed on one node, and that the rooms did not all land on
// the same node.
func keepsRoomsOnOneNode(t *testing.T, c *cluster) {
	ctx := context.Background()
	rooms := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
	const per = 4
	hosts := map[int]bool{}
	for _, room := range rooms {
		for i := range per {
			path := "/ws/" + room
			if i%2 == 1 {
				// A reconnecting client: the query string must not move it.
				path += fmt.Sprintf("?since=0&attempt=%d", i)
			}
			conn, err := testsupport.DialWS(ctx, c.lb.URL(path))
			if err != nil {
				t.Fatalf("dial %s: %v", path, err)
			}
			t.Cleanup(func() { conn.Close() })
			j, _, _, err := conn.Joined(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			// Members counts the node's own connections to the room.
			if j.Members != i+1 {
				t.Fatalf("client %d of room %s joined a node holding %d members, want %d: the room is split", i, room, j.Members, i+1)
			}
		}
		hosts[c.hostOf(t, room, per)] = true
	}
	if len(hosts) < 2 {
		t.Errorf("all %d rooms hashed to one node of %d", len(rooms), len(c.nodes))
	}

	// GET /ws joins lobby: it must land where /ws/lobby does.
	for i, path := range []string{"/ws", "/ws/lobby", "/ws?since=0", "/ws/lobby?since=0"} {
		conn, err := testsupport.DialWS(ctx, c.lb.URL(path))
		if err != nil {
			t.Fatalf("dial %s: %v", path, err)
		}
		t.Cleanup(func() { conn.Close() })
		j, _, _, err := conn.Joined(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if j.Room != "lobby" || j.Members != i+1 {
			t.Fatalf("%s joined %s with %d members, want lobby with %d", path, j.Room, j.Members, i+1)
		}
	}
	c.hostOf(t, "lobby", 4)
}

func TestHAProxyKeepsRoomOnOneNode(t *testing.T) {
	c := startHAProxyCluster(t, 3)
	keepsRoomsOnOneNode(t, c)

	// Plain HTTP goes round robin to nodes that are ready.
	for range 4 {
		code, body := get(t, "http://"+c.lb.Addr+"/readyz")
		if code != 200 || body != "ready\n" {
			t.Fatalf("readyz through haproxy: %d %q", code, body)
		}
	}
}

func TestHAProxyKeepsDegradedNodesInRotation(t *testing.T) {
	c := startHAProxyCluster(t, 2)
	c.redis.Stop()
	for _, n := range c.nodes {
		testsupport.Eventually(t, 15*time.Second, n.Name+" degraded", func() bool {
			_, body := get(t, "http://"+n.Addr+"/readyz")
			return strings.HasPrefix(body, "degraded")
		})
	}
	// Were "degraded" a failure, haproxy would take the nodes out after
	// fall (2) checks of inter (2s) and fastinter (0.5s): watch longer than
	// that.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ss, err := c.lb.Servers("ws")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			if s.Status != "UP" {
				t.Fatalf("haproxy took degraded %s out of rotation: %+v", s.Server, s)
			}
		}
		time.Sleep(200 * time.Millisecond) // sampling a state over a period
	}
	conn, err := testsupport.DialWS(context.Background(), c.lb.URL("/ws/during-outage"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, _, err := conn.Joined(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	// A room loaded during the outage may have members on the other node:
	// neither orders it alone, the message is refused (and the connection
	// stays open), where it used to be delivered here under a local seq.
	if err := conn.Send("still here"); err != nil {
		t.Fatal(err)
	}
	if f, err := conn.Read(5 * time.Second); err != nil || f.Type != "error" || f.Code != "unavailable" {
		t.Fatalf("a message during the outage: %+v, %v; want an error unavailable", f, err)
	}
}

// TestHAProxyNodeDrainedClientsMoveWithoutLoss: the room's node drained
// (SIGTERM) hands its rooms to a follower, and its members lose nothing. A
// node killed loses its rooms instead: they are taken over under a new
// epoch (TestHAProxyOwnerKilledRoomTakenOver, docs/guarantees.md).
func TestHAProxyNodeDrainedClientsMoveWithoutLoss(t *testing.T) {
	c := startHAProxyCluster(t, 3)
	failover(t, c, func(n *testsupport.Node) error { return n.Terminate(15 * time.Second) }, true)
}

// failover puts followers of a room behind the load balancer, posts into
// the room from another node, stops the room's node mid-run with stop and
// checks that every follower reconnected through the load balancer and
// received every message exactly once, in order. With drained, each
// follower must have been told 1001.
func failover(t *testing.T, c *cluster, stop func(*testsupport.Node) error, drained bool) {
	const (
		room      = "failover"
		followers = 4
		total     = 150
		stopAt    = 40
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// Half the followers are the Go client package (github.com/scalechat/scalechat/client), the
	// others a bare reconnect loop: both must come through.
	var fs []*follower
	for i := range followers {
		f := newFollower(c.lb.URL("/ws/" + room))
		fs = append(fs, f)
		if i%2 == 0 {
			wg.Go(func() { f.runClient(ctx, c.lb.URL("/ws"), room) })
		} else {
			wg.Go(func() { f.run(ctx) })
		}
	}
	for i, f := range fs {
		if !f.wait(func(s followerState) bool { return s.connects >= 1 }, 10*time.Second) {
			t.Fatalf("follower %d never connected: %+v", i, f.state())
		}
	}
	host := c.hostOf(t, room, followers)
	writerNode := c.nodes[(host+1)%len(c.nodes)]
	w, err := testsupport.DialWS(ctx, writerNode.URL("/ws/"+room))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, _, _, err := w.Joined(5 * time.Second); err != nil {
		t.Fatal(err)
	}

	stopped := make(chan error, 1)
	for i := 1; i <= total; i++ {
		if i == stopAt+1 {
			for j, f := range fs {
				if !f.wait(func(s followerState) bool { return s.last >= stopAt }, 10*time.Second) {
					t.Fatalf("follower %d stuck before the stop: %+v", j, f.state())
				}
			}
			wg.Go(func() { stopped <- stop(c.nodes[host]) })
		}
		if err := w.Send(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		for {
			f, err := w.Read(5 * time.Second)
			if err != nil {
				t.Fatalf("writer on %s, message %d: %v", writerNode.Name, i, err)
			}
			if f.Type != "" {
				continue
			}
			if f.Seq != uint64(i) || f.Text != fmt.Sprint(i) {
				t.Fatalf("writer's echo %d: %+v", i, f)
			}
			break
		}
		time.Sleep(5 * time.Millisecond) // paces the load; nothing waits on it
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stopping %s: %v", c.nodes[host].Name, err)
	}
	for i, f := range fs {
		if !f.wait(func(s followerState) bool { return s.last >= total || len(s.errs) > 0 }, 20*time.Second) {
			t.Fatalf("follower %d did not catch up: %+v", i, f.state())
		}
	}
	cancel()
	wg.Wait()
	for i, f := range fs {
		s := f.state()
		if len(s.errs) > 0 {
			t.Errorf("follower %d: %s", i, strings.Join(s.errs, "; "))
		}
		if s.last != total || len(s.texts) != total {
			t.Errorf("follower %d: last seq %d, %d messages, want %d", i, s.last, len(s.texts), total)
		}
		for j, text := range s.texts {
			if text != fmt.Sprint(j+1) {
				t.Errorf("follower %d: message %d is %q", i, j+1, text)
				break
			}
		}
		// Every message once, in order, over two connections: it resumed
		// on another node. None may have been replayed: with the owner
		// order the room's messages wait while its owner hands it over, and
		// a follower may be back before the next.
		if s.connects < 2 {
			t.Errorf("follower %d connected %d times: it never resumed on another node", i, s.connects)
		}
		t.Logf("follower %d: %d connections, %d messages replayed on reconnect, close codes %v", i, s.connects, s.replayed, s.closes)
		if drained && !containsInt(s.closes, 1001) {
			t.Errorf("follower %d: close codes %v, want 1001", i, s.closes)
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// follower is a client of one room that reconnects after any disconnect
// with since = the last seq it received, and checks that seqs arrive one by
// one.
type follower struct {
	url string

	mu      sync.Mutex
	s       followerState
	changed chan struct{} // closed and replaced on every change of s
}

type followerState struct {
	connects int      // connections that joined
	last     uint64   // last seq received
	texts    []string // in seq order
	closes   []int    // close codes received
	replayed int      // messages received as history on a reconnect
	errs     []string // what went wrong: gaps, duplicates, give-ups
}

func newFollower(url string) *follower {
	return &follower{url: url, changed: make(chan struct{})}
}

func (f *follower) update(fn func(*followerState)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.s)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *follower) state() followerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.s
	s.texts = append([]string(nil), s.texts...)
	s.closes = append([]int(nil), s.closes...)
	s.errs = append([]string(nil), s.errs...)
	return s
}

// wait waits until cond holds, at most timeout.
func (f *follower) wait(cond func(followerState) bool, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		ok, ch := cond(f.s), f.changed
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

func (f *follower) accept(m testsupport.WSFrame) {
	if m.Type != "" {
		return
	}
	f.update(func(s *followerState) {
		if m.Seq != s.last+1 {
			s.errs = append(s.errs, fmt.Sprintf("seq %d after %d", m.Seq, s.last))
		}
		if m.Seq > s.last {
			s.last = m.Seq
			s.texts = append(s.texts, m.Text)
		}
	})
}

// run connects at once, and after a disconnect waits a backoff of 100 ms
// doubling up to 1 s before each attempt, like a real client: messages
// posted meanwhile must come back through since.
func (f *follower) run(ctx context.Context) {
	const first = 100 * time.Millisecond
	backoff, failures := time.Duration(0), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		url := fmt.Sprintf("%s?since=%d", f.url, f.state().last)
		conn, err := testsupport.DialWS(ctx, url)
		if err != nil {
			failures++
			if failures > 20 {
				f.update(func(s *followerState) { s.errs = append(s.errs, "gave up reconnecting: "+err.Error()) })
				return
			}
			backoff = min(max(2*backoff, first), time.Second)
			continue
		}
		failures = 0
		f.session(ctx, conn)
		backoff = first
	}
}

// runClient follows the room with the Go client package, which reconnects
// by itself with backoff and since.
func (f *follower) runClient(ctx context.Context, base, room string) {
	cl, err := client.Dial(ctx, client.Config{URL: base, Room: room, Sender: "follower",
		Backoff: client.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}, MaxAttempts: 20})
	if err != nil {
		f.update(func(s *followerState) { s.errs = append(s.errs, "client: "+err.Error()) })
		return
	}
	stop := context.AfterFunc(ctx, func() { cl.Close() })
	defer stop()
	history := 0 // messages announced by the last joined frame, still to come
	for ev := range cl.Events() {
		switch e := ev.(type) {
		case *client.Joined:
			history = e.History
			f.update(func(s *followerState) {
				if s.connects > 0 {
					s.replayed += e.History
				}
				s.connects++
			})
		case *client.Message:
			if history > 0 {
				history--
			}
			f.accept(testsupport.WSFrame{Seq: e.Seq, Text: e.Text})
		case *client.HistoryGap:
			f.update(func(s *followerState) { s.errs = append(s.errs, fmt.Sprintf("history gap: %+v", *e)) })
		case *client.State:
			var ce *client.ConnError
			if e.State == client.Disconnected && errors.As(e.Err, &ce) && ce.Code != 0 {
				f.update(func(s *followerState) { s.closes = append(s.closes, ce.Code) })
			}
			if e.State == client.Closed && e.Err != nil && ctx.Err() == nil {
				f.update(func(s *followerState) { s.errs = append(s.errs, "client gave up: "+e.Err.Error()) })
			}
		}
	}
}

// session reads one connection until it ends.
func (f *follower) session(ctx context.Context, conn *testsupport.WSConn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	_, gap, hist, err := conn.Joined(10 * time.Second)
	if err != nil {
		if ctx.Err() == nil {
			f.update(func(s *followerState) { s.errs = append(s.errs, "join: "+err.Error()) })
		}
		return
	}
	if gap != nil {
		f.update(func(s *followerState) { s.errs = append(s.errs, fmt.Sprintf("history gap: %+v", *gap)) })
	}
	for _, m := range hist {
		f.accept(m)
	}
	f.update(func(s *followerState) {
		if s.connects > 0 {
			s.replayed += len(hist)
		}
		s.connects++
	})
	for {
		m, err := conn.Read(time.Minute)
		var ce *testsupport.CloseError
		switch {
		case errors.As(err, &ce):
			f.update(func(s *followerState) { s.closes = append(s.closes, ce.Code) })
			return
		case err != nil:
			return // EOF from a killed node, or the test is over
		}
		f.accept(m)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestHAProxyOwnerKilledRoomTakenOver: a room whose members all sit on one
// node is ordered by that node (Redis only stores it). When the node is
// killed, its clients come back through HAProxy to the other node, which takes
// the room over once the dead owner's lease is gone: under a new epoch, so
// the clients are told (history_gap with reset) and get the history Redis
// holds, then the room goes on, its seqs never reused.
func TestHAProxyOwnerKilledRoomTakenOver(t *testing.T) {
	c := startHAProxyCluster(t, 2)
	ctx := context.Background()
	const room, before = "owned", 20
	var conns []*testsupport.WSConn
	var epoch string
	owner := c.nodes[0]
	for range 3 {
		conn, err := testsupport.DialWS(ctx, owner.URL("/ws/"+room))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { conn.Close() }()
		j, _, _, err := conn.Joined(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		epoch = j.Epoch
		conns = append(conns, conn)
	}
	for i := 1; i <= before; i++ {
		if err := conns[0].Send(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		for _, conn := range conns {
			if f, err := conn.Read(5 * time.Second); err != nil || f.Seq != uint64(i) {
				t.Fatalf("message %d: %+v %v", i, f, err)
			}
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: c.redis.Addr()})
	defer rdb.Close()
	holder, err := rdb.Get(ctx, "scalechat:{"+room+"}:holder").Result()
	if err != nil || holder == "" {
		t.Fatalf("the room's members are on one node, but no node holds it (%q, %v)", holder, err)
	}
	// The owner stores behind the messages: wait for them before the kill
	// (the counter is raised by the script that stores them; a round's run of
	// a room's messages is one stream entry).
	testsupport.Eventually(t, 10*time.Second, "the owned messages stored in Redis", func() bool {
		n, _ := rdb.Get(ctx, "scalechat:{"+room+"}:seq").Int()
		return n == before
	})
	start := time.Now()
	owner.Kill()
	for _, conn := range conns {
		conn.Close()
	}
	var back []*testsupport.WSConn
	for i := range conns {
		conn, err := testsupport.DialWS(ctx, c.lb.URL(fmt.Sprintf("/ws/%s?since=%d&epoch=%s", room, before, epoch)))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { conn.Close() }()
		j, gap, hist, err := conn.Joined(15 * time.Second)
		if err != nil {
			t.Fatalf("client %d coming back: %v", i, err)
		}
		if j.Epoch == epoch || gap == nil || !gap.Reset || len(hist) != before || hist[0].Text != "1" || hist[before-1].Text != fmt.Sprint(before) {
			t.Fatalf("client %d came back to epoch %q (was %q), gap %+v, %d messages replayed: want a new epoch, a reset and all %d",
				i, j.Epoch, epoch, gap, len(hist), before)
		}
		back = append(back, conn)
	}
	t.Logf("the room was taken over %v after its owner was killed", time.Since(start).Round(time.Millisecond))
	if err := back[0].Send("after"); err != nil {
		t.Fatal(err)
	}
	for i, conn := range back {
		if f, err := conn.Read(5 * time.Second); err != nil || f.Text != "after" || f.Seq != before+1 {
			t.Fatalf("client %d after the takeover: %+v %v", i, f, err)
		}
	}
}

// TestPresenceAcrossNodes: who is in a room is known on every node, join and
// leave events cross nodes, and the members of a node that dies leave the
// room for the others within a few seconds (its lease ends).
func TestPresenceAcrossNodes(t *testing.T) {
	testsupport.Need(t, "redis-server", "redis-server")
	redis := testsupport.StartRedis(t)
	nodes := startNodes(t, redis, 2)
	ctx := context.Background()
	alice, err := testsupport.DialWS(ctx, nodes[0].URL("/ws/pres?name=alice&presence=1"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if _, _, _, err := alice.Joined(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bob", "bob", ""} { // bob twice, and someone without a name
		c, err := testsupport.DialWS(ctx, nodes[1].URL("/ws/pres?name="+name))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, _, _, err := c.Joined(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"alice", "bob"} {
		if e, err := alice.ReadType("presence_join", 5*time.Second); err != nil || e.User != want {
			t.Fatalf("alice waited for %s's join: %+v %v", want, e, err)
		}
	}
	// A second connection of a user sends no event: ask until node 1 knows
	// of it (bounded).
	var p testsupport.WSFrame
	for deadline := time.Now().Add(5 * time.Second); ; {
		if err := alice.SendFrame(map[string]string{"type": "presence", "room": "pres"}); err != nil {
			t.Fatal(err)
		}
		if p, err = alice.ReadType("presence", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if p.Members == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // paces the questions
	}
	if p.Members != 4 || p.Anonymous != 1 || len(p.Users) != 2 ||
		p.Users[0].User != "alice" || p.Users[0].Connections != 1 || p.Users[1].User != "bob" || p.Users[1].Connections != 2 {
		t.Fatalf("presence from node 1: %+v; want 4 members: alice ×1, bob ×2 (node 2), 1 anonymous", p)
	}
	start := time.Now()
	nodes[1].Kill()
	if e, err := alice.ReadType("presence_leave", 15*time.Second); err != nil || e.User != "bob" {
		t.Fatalf("after node 2 died, alice was told %+v %v; want bob's leave", e, err)
	}
	t.Logf("bob left the room %v after his node was killed", time.Since(start).Round(time.Millisecond))
	if err := alice.SendFrame(map[string]string{"type": "presence", "room": "pres"}); err != nil {
		t.Fatal(err)
	}
	if p, err := alice.ReadType("presence", 5*time.Second); err != nil || p.Members != 1 || len(p.Users) != 1 || p.Anonymous != 0 {
		t.Errorf("presence after node 2 died: %+v %v; want alice alone", p, err)
	}
}
