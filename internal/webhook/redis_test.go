package webhook

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// whNode is a cluster node's webhooks in the test's process: its tracker
// and its dispatcher, each running until stop.
type whNode struct {
	w    *Redis
	d    *Dispatcher
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func startWebhookNode(t *testing.T, url, receiver string) *whNode {
	t.Helper()
	w, err := NewRedis(RedisConfig{URL: url, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	n := &whNode{w: w, d: NewDispatcher(w, DispatcherConfig{URL: receiver, Secret: []byte("k"),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})}
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	n.wg.Go(func() { w.Run(ctx) })
	n.wg.Go(func() { n.d.Run(ctx) })
	t.Cleanup(func() { n.stop(); n.wg.Wait() })
	return n
}

// crash stops the node as a SIGKILL would: nothing it would tell Redis on
// its way out reaches it (its connection is closed first).
func (n *whNode) crash() {
	_ = n.w.rdb.Close()
	n.stop()
	n.wg.Wait()
}

func (n *whNode) leader() bool {
	n.w.leadMu.Lock()
	defer n.w.leadMu.Unlock()
	return n.w.leader
}

// waitView waits until the receiver believes want, and fails with what it
// got after timeout.
func waitView(t *testing.T, rcv *Receiver, want View, timeout time.Duration) {
	t.Helper()
	if !rcv.Await(want, timeout) {
		t.Fatalf("the receiver believes %+v, want %+v; events: %+v", rcv.View(), want, rcv.Events())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polls a state no signal reports (another goroutine's lease)
	}
}

// TestRedisWebhooksAcrossNodes runs two nodes' webhooks on a real
// redis-server and a real HTTP receiver: users come and go on both nodes,
// the dispatching node is killed (its lease then ends) and Redis restarts
// empty. After deduplication by ID the receiver never sees a transition
// twice in a row, and it ends believing what is true.
func TestRedisWebhooksAcrossNodes(t *testing.T) {
	rs := testsupport.StartRedis(t)
	rcv := NewReceiver([]byte("k"))
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	b := startWebhookNode(t, rs.URL(), srv.URL)
	waitFor(t, "b to dispatch", b.leader)
	a := startWebhookNode(t, rs.URL(), srv.URL)

	a.w.Presence("r1", "ann", 1)
	b.w.Presence("r1", "bob", 1)
	b.w.Presence("r1", "ann", 1)
	b.w.Presence("r2", "", 1)
	waitView(t, rcv, View{Rooms: []string{"r1", "r2"}, Users: []string{"ann", "bob"},
		Members: map[string][]string{"r1": {"ann", "bob"}}}, 10*time.Second)

	a.w.Presence("r1", "ann", 0) // ann is still in r1 on b: no event
	a.w.Presence("r3", "cat", 1)
	waitView(t, rcv, View{Rooms: []string{"r1", "r2", "r3"}, Users: []string{"ann", "bob", "cat"},
		Members: map[string][]string{"r1": {"ann", "bob"}, "r3": {"cat"}}}, 10*time.Second)

	// b dies with ann and bob in r1 and an anonymous connection in r2: once
	// its lease ends a takes over both its counts and the dispatching.
	b.crash()
	waitView(t, rcv, View{Rooms: []string{"r3"}, Users: []string{"cat"},
		Members: map[string][]string{"r3": {"cat"}}}, 15*time.Second)
	if !a.leader() {
		t.Error("a is not the dispatcher after b died")
	}

	// Redis loses everything: a's state comes back under a new epoch.
	rs.Stop()
	a.w.Presence("r3", "dan", 1) // while Redis is down
	rs.Restart()
	waitView(t, rcv, View{Rooms: []string{"r3"}, Users: []string{"cat", "dan"},
		Members: map[string][]string{"r3": {"cat", "dan"}}}, 15*time.Second)
	a.w.Presence("r3", "cat", 0)
	a.w.Presence("r3", "dan", 0)
	waitView(t, rcv, View{}, 10*time.Second)

	st := rcv.Stats()
	if len(st.Violations) > 0 || st.BadSignatures > 0 {
		t.Errorf("violations %q, bad signatures %d", st.Violations, st.BadSignatures)
	}
	resets, vacated := 0, map[string]int{}
	for _, e := range rcv.Events() {
		switch e.Name {
		case Reset:
			resets++
		case RoomVacated:
			vacated[e.Room]++
		}
	}
	if resets != 2 {
		t.Errorf("%d resets, want 2: the first state and the one after Redis lost it", resets)
	}
	if want := map[string]int{"r1": 1, "r2": 1, "r3": 1}; !reflect.DeepEqual(vacated, want) {
		t.Errorf("vacated %v, want %v", vacated, want)
	}
	t.Logf("receiver %+v, dispatcher a %+v", st, a.d.Stats())
}

// TestRedisWebhooksOnRedisCluster runs the webhooks on a Redis Cluster of 3
// masters (every key in the {webhooks} slot): a user on two nodes, a
// published message, the node that had her last connection killed.
func TestRedisWebhooksOnRedisCluster(t *testing.T) {
	rc := testsupport.StartRedisCluster(t, 3, 0)
	rcv := NewReceiver([]byte("k"))
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	a := startWebhookNode(t, rc.URL(), srv.URL)
	b := startWebhookNode(t, rc.URL(), srv.URL)

	a.w.Presence("r", "ann", 1)
	b.w.Presence("r", "ann", 2)
	b.w.Published("r", 7, []byte(`{"room":"r","seq":7,"text":"hi"}`))
	a.w.Presence("r", "ann", 0)
	waitView(t, rcv, View{Rooms: []string{"r"}, Users: []string{"ann"}, Members: map[string][]string{"r": {"ann"}}}, 10*time.Second)
	b.crash()
	waitView(t, rcv, View{}, 15*time.Second)

	var got []string
	var pub Event
	for _, e := range rcv.Events() {
		got = append(got, e.Name)
		if e.Name == MessagePublished {
			pub = e
		}
	}
	want := []string{"reset", "user_online", "room_occupied", "member_joined", "message_published", "member_left", "room_vacated", "user_offline"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if pub.Room != "r" || pub.Seq != 7 || string(pub.Message) != `{"room":"r","seq":7,"text":"hi"}` {
		t.Errorf("published event %+v", pub)
	}
	if st := rcv.Stats(); len(st.Violations) > 0 {
		t.Errorf("violations %q", st.Violations)
	}
}

// TestWebhookScript pins lua/webhook.lua's transitions on a real
// redis-server: each case runs calls in order on a fresh key prefix and
// reads the stream.
func TestWebhookScript(t *testing.T) {
	rs := testsupport.StartRedis(t)
	type call struct {
		node, op string
		items    []any
	}
	p := func(room, user string, n int) []any { return []any{"p", room, user, strconv.Itoa(n)} }
	cat := func(xs ...[]any) []any {
		var out []any
		for _, x := range xs {
			out = append(out, x...)
		}
		return out
	}
	for i, tc := range []struct {
		name  string
		calls []call
		want  []string
	}{
		{"a node unknown must sync first", []call{{"a", "apply", p("r", "u", 1)}}, []string{"reset"}},
		{"two nodes, one transition each way", []call{
			{"a", "sync", nil}, {"b", "sync", nil},
			{"a", "apply", p("r", "u", 1)}, {"b", "apply", p("r", "u", 1)},
			{"a", "apply", p("r", "u", 0)}, {"b", "apply", p("r", "u", 0)}},
			[]string{"reset", "user_online u", "room_occupied r", "member_joined r u", "member_left r u", "room_vacated r", "user_offline u"}},
		{"sync sets to 0 what it does not name", []call{
			{"a", "sync", cat(p("r", "u", 2), p("s", "v", 1))}, {"a", "sync", p("r", "u", 1)}},
			[]string{"reset", "user_online u", "room_occupied r", "member_joined r u", "user_online v", "room_occupied s", "member_joined s v",
				"member_left s v", "room_vacated s", "user_offline v"}},
		{"gone leaves a live node alone", []call{{"a", "sync", p("r", "u", 1)}, {"a", "gone", nil}},
			[]string{"reset", "user_online u", "room_occupied r", "member_joined r u"}},
		{"leave removes the node's counts", []call{{"a", "sync", p("r", "", 3)}, {"a", "leave", nil}},
			[]string{"reset", "room_occupied r", "room_vacated r"}},
		{"a message", []call{{"a", "sync", nil}, {"a", "apply", []any{"m", "r", "9", `{"seq":9}`}}},
			[]string{"reset", "message_published r"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewRedis(RedisConfig{URL: rs.URL(), Prefix: "t" + strconv.Itoa(i)})
			if err != nil {
				t.Fatal(err)
			}
			defer w.rdb.Close()
			ctx := context.Background()
			for _, c := range tc.calls {
				if _, err := w.run(ctx, w.keysFor(c.node), c.op, c.node, c.items); err != nil {
					t.Fatal(err)
				}
			}
			msgs, err := w.rdb.XRange(ctx, w.keys[1], "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range msgs {
				e := streamEvent(m)
				s := e.Name
				for _, f := range []string{e.Room, e.User} {
					if f != "" {
						s += " " + f
					}
				}
				got = append(got, s)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("stream\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestRedisWebhooksCountWhatTheFullStreamDrops pins that a full stream (no
// dispatcher, the backend away) drops new events, and that the node counts
// each one.
func TestRedisWebhooksCountWhatTheFullStreamDrops(t *testing.T) {
	w := startTestRedis(t, RedisConfig{MaxStream: 4})
	ctx := context.Background()
	for _, items := range [][]any{nil, {"p", "r", "u", "1"}, {"p", "s", "v", "1"}} { // reset, 3 events, 3 more
		if _, err := w.run(ctx, w.keys, "sync", w.id, items); err != nil {
			t.Fatal(err)
		}
	}
	n, err := w.rdb.XLen(ctx, w.keys[1]).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The second sync also sets r/u to 0 (it does not name it): 3 more.
	if st := w.Stats(); n != 4 || st.Dropped != 6 {
		t.Errorf("stream %d entries, %d dropped; want 4 and 6", n, st.Dropped)
	}
	if v, _ := w.rdb.Get(ctx, w.keys[7]).Int(); v != 6 {
		t.Errorf("the cluster's dropped counter is %d, want 6", v)
	}
}

// TestRedisWebhooksGapIsSeen: events the full stream dropped leave a gap
// the backend sees: once the dispatcher has sent what was there, the next
// event appended follows a dropped event counting them; messages a node
// gave up (Redis unreachable too long) are counted in one too.
func TestRedisWebhooksGapIsSeen(t *testing.T) {
	w := startTestRedis(t, RedisConfig{MaxStream: 4})
	ctx := context.Background()
	run := func(op string, items ...any) {
		t.Helper()
		if _, err := w.run(ctx, w.keys, op, w.id, items); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []Event {
		t.Helper()
		ms, err := w.rdb.XRange(ctx, w.keys[1], "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		var evs []Event
		for _, m := range ms {
			evs = append(evs, streamEvent(m))
		}
		return evs
	}
	names := func() []string { // the stream's events
		t.Helper()
		var got []string
		for _, e := range read() {
			s := e.Name
			if e.Count > 0 {
				s += " " + strconv.FormatUint(e.Count, 10)
			}
			got = append(got, s)
		}
		return got
	}
	for _, step := range []struct {
		sent  bool // the dispatcher sent the stream before (the stream is emptied)
		op    string
		items []any
		want  []string
	}{
		{false, "sync", []any{"p", "r", "u", "1"}, []string{"reset", "user_online", "room_occupied", "member_joined"}},
		{false, "apply", []any{"p", "r", "u", "0"}, []string{"reset", "user_online", "room_occupied", "member_joined"}}, // full: left, vacated, offline dropped
		{true, "apply", []any{"p", "r", "u", "1"}, []string{"dropped 3", "user_online", "room_occupied", "member_joined"}},
		{true, "sync", []any{"d", "", "5", "", "p", "r", "u", "1"}, nil}, // a node gave up 5 messages, resyncs: nothing changed
		{false, "apply", []any{"m", "r", "7", "{}"}, []string{"dropped 5", "message_published"}},
	} {
		if step.sent {
			if err := w.rdb.Del(ctx, w.keys[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		run(step.op, step.items...)
		if got := names(); !slices.Equal(got, step.want) {
			t.Errorf("after %s %v: stream\n got %q\nwant %q", step.op, step.items, got, step.want)
		}
	}
}

// TestRedisWebhooksStreamBoundedInBytes: the cluster's stream is bounded
// in bytes as well as in entries: of ten 16 KiB messages, those that fit
// in 50 KiB are appended, the others dropped; the entries the dispatcher
// commits give their bytes back, and the next message follows a dropped
// event.
func TestRedisWebhooksStreamBoundedInBytes(t *testing.T) {
	w := startTestRedis(t, RedisConfig{MaxStream: 1000, MaxStreamBytes: 50 << 10})
	ctx := context.Background()
	msg := `{"text":"` + strings.Repeat("x", 16<<10) + `"}`
	var items []any
	for i := range 10 {
		items = append(items, "m", "r", strconv.Itoa(i+1), msg)
	}
	if _, err := w.run(ctx, w.keys, "sync", w.id, items); err != nil {
		t.Fatal(err)
	}
	ms, err := w.rdb.XRange(ctx, w.keys[1], "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); len(ms) != 4 || st.Dropped != 7 { // the reset and 3 messages
		t.Fatalf("%d entries, %d dropped; want 4 and 7", len(ms), st.Dropped)
	}
	if n, _ := w.rdb.Get(ctx, w.keys[11]).Int64(); n > 50<<10 || n < 3*16<<10 {
		t.Errorf("the stream holds %d bytes by its count, want 48–50 KiB", n)
	}
	if _, err := w.run(ctx, w.keys, "lead", w.id, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.run(ctx, w.keys, "commit", w.id, []any{ms[len(ms)-1].ID}); err != nil {
		t.Fatal(err)
	}
	if n, err := w.rdb.Exists(ctx, w.keys[11]).Result(); err != nil || n != 0 {
		t.Errorf("the bytes of a stream sent whole are still counted (%d, %v)", n, err)
	}
	if _, err := w.run(ctx, w.keys, "apply", w.id, []any{"m", "r", "11", msg}); err != nil {
		t.Fatal(err)
	}
	ms, err = w.rdb.XRange(ctx, w.keys[1], "-", "+").Result()
	if err != nil || len(ms) != 2 || streamEvent(ms[0]).Name != Dropped || streamEvent(ms[0]).Count != 7 || streamEvent(ms[1]).Seq != 11 {
		t.Errorf("after the commit: %v %v, want a dropped event counting 7, then message 11", ms, err)
	}
}

// startTestRedis returns a node's webhooks, not running, on a redis-server
// of its own: for the tests that call the script step by step.
func startTestRedis(t *testing.T, cfg RedisConfig) *Redis {
	t.Helper()
	cfg.URL = testsupport.StartRedis(t).URL()
	w, err := NewRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.rdb.Close() })
	return w
}
