//go:build linux

package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/server/servertest"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// fast reconnects keep the tests short; jitter stays on.
var fast = Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}

func dial(t *testing.T, url, room, sender string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel() // the connection must outlive the dial context
	c, err := Dial(ctx, Config{URL: url, Room: room, Sender: sender, Backoff: fast})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// next returns the next event of type T for which match is true (nil:
// any), passing events of other types to skip (nil: ignored). It fails
// after 10 s.
func next[T Event](t *testing.T, c *Client, match func(T) bool, skip func(Event)) T {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				var zero T
				t.Fatalf("events closed while waiting for %T (client error: %v)", zero, c.Err())
			}
			if e, ok := ev.(T); ok {
				if match == nil || match(e) {
					return e
				}
			} else if skip != nil {
				skip(ev)
			}
		case <-timeout:
			var zero T
			t.Fatalf("no %T within 10s", zero)
		}
	}
}

func connected(t *testing.T, c *Client) {
	t.Helper()
	next(t, c, func(s *State) bool { return s.State == Connected }, nil)
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func send(t *testing.T, c *Client, room, text string) uint64 {
	t.Helper()
	id, err := c.SendTo(ctx(t), room, text)
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	return id
}

// messages collects chat messages of room until one has seq last, failing
// on any other event than those allowed.
func messages(t *testing.T, c *Client, room string, last uint64) []*Message {
	t.Helper()
	var got []*Message
	next(t, c, func(m *Message) bool {
		if m.Room == room {
			got = append(got, m)
		}
		return m.Room == room && m.Seq >= last
	}, nil)
	return got
}

// seqTexts renders messages as "seq:text" for comparison.
func seqTexts(ms []*Message) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s", m.Seq, m.Text)
	}
	return b.String()
}

func TestMessagesFlowBetweenClients(t *testing.T) {
	srv := servertest.Start(t, nil)
	alice := dial(t, srv.URL("/ws"), "r1", "alice")
	connected(t, alice)
	bob := dial(t, srv.URL("/ws"), "r1", "bob")
	j := next[*Joined](t, bob, nil, nil)
	if j.Room != "r1" || j.Members != 2 {
		t.Errorf("bob joined %+v", j)
	}
	connected(t, bob)

	id := send(t, alice, "r1", "hello bob")
	if id != 1 {
		t.Errorf("first message_id %d, want 1", id)
	}
	for _, c := range []*Client{alice, bob} {
		m := next[*Message](t, c, nil, nil)
		if m.Room != "r1" || m.Seq != 1 || m.Text != "hello bob" || m.Sender != "alice" || m.MessageID != 1 || m.Own != (c == alice) {
			t.Errorf("got %+v", m)
		}
		if time.Since(m.ServerAt) > time.Minute || m.SentAt == "" {
			t.Errorf("times: server_at %v, sent_at %q", m.ServerAt, m.SentAt)
		}
	}
	if err := alice.Flush(ctx(t)); err != nil || alice.Pending() != 0 {
		t.Fatalf("flush: %v, %d pending", err, alice.Pending())
	}

	// A second room over the same connection.
	if err := bob.Join(ctx(t), "r2"); err != nil {
		t.Fatal(err)
	}
	if j := next[*Joined](t, bob, nil, nil); j.Room != "r2" || j.Members != 1 {
		t.Errorf("joined %+v", j)
	}
	if err := bob.Join(ctx(t), "r2"); !errors.Is(err, ErrAlreadyJoined) {
		t.Errorf("second join: %v", err)
	}
	send(t, bob, "r2", "in r2")
	if m := next[*Message](t, bob, nil, nil); m.Room != "r2" || m.Seq != 1 || !m.Own {
		t.Errorf("got %+v", m)
	}
	if err := bob.Presence(ctx(t), "r1"); err != nil {
		t.Fatal(err)
	}
	if p := next[*Presence](t, bob, nil, nil); p.Room != "r1" || p.Members != 2 {
		t.Errorf("presence %+v", p)
	}
	if err := bob.Leave(ctx(t), "r2"); err != nil {
		t.Fatal(err)
	}
	if l := next[*Left](t, bob, nil, nil); l.Room != "r2" || l.Seq != 1 {
		t.Errorf("left %+v", l)
	}
	if _, err := bob.SendTo(ctx(t), "r2", "gone"); !errors.Is(err, ErrNotJoined) {
		t.Errorf("send to a left room: %v", err)
	}
	if got := fmt.Sprint(bob.Rooms()); got != "[r1]" {
		t.Errorf("rooms %s", got)
	}

	// A late joiner gets the history.
	carol := dial(t, srv.URL("/ws"), "r1", "carol")
	if j := next[*Joined](t, carol, nil, nil); j.History != 1 {
		t.Errorf("joined %+v", j)
	}
	if m := next[*Message](t, carol, nil, nil); m.Text != "hello bob" || m.Own {
		t.Errorf("history %+v", m)
	}
}

func TestErrorFramesReachTheClient(t *testing.T) {
	srv := servertest.Start(t, func(c *server.Config) { c.MaxRoomsPerConn = 1 })
	c := dial(t, srv.URL("/ws"), "solo", "alice")
	connected(t, c)
	if err := c.Join(ctx(t), "second"); err != nil {
		t.Fatal(err)
	}
	e := next[*Error](t, c, nil, nil)
	if e.Code != "too_many_rooms" || e.Room != "second" {
		t.Errorf("error %+v", e)
	}
	if got := fmt.Sprint(c.Rooms()); got != "[solo]" {
		t.Errorf("after a refused join, rooms %s", got)
	}
}

func TestCloseSends1000AndEndsEvents(t *testing.T) {
	srv := servertest.Start(t, nil)
	c, err := Dial(ctx(t), Config{URL: srv.URL("/ws")})
	if err != nil {
		t.Fatal(err)
	}
	connected(t, c)
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	var last Event
	for ev := range c.Events() {
		last = ev
	}
	if s, ok := last.(*State); !ok || s.State != Closed || s.Err != nil {
		t.Errorf("last event %#v", last)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := c.Send(ctx(t), "after close"); !errors.Is(err, ErrClosed) {
		t.Errorf("send after close: %v", err)
	}
	// The server counts the close once it has answered it, which may come
	// just after the client saw the answer: poll, there is no signal.
	deadline := time.Now().Add(5 * time.Second)
	for srv.Server().Stats().Disconnects[1000] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("server disconnects %v, want one 1000", srv.Server().Stats().Disconnects)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDialErrors(t *testing.T) {
	srv := servertest.Start(t, nil)
	stopped := servertest.Start(t, nil)
	stopped.Stop()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad scheme", Config{URL: "ftp://x/ws"}, "want a ws://"},
		{"bad room", Config{URL: srv.URL("/ws"), Room: "no spaces"}, "room names are"},
		{"long sender", Config{URL: srv.URL("/ws"), Sender: strings.Repeat("x", 65)}, "at most 64 bytes"},
		{"nobody listening", Config{URL: stopped.URL("/ws")}, "cannot connect to ws://" + stopped.Addr() + "/ws/lobby"},
		{"not found", Config{URL: srv.URL("/nothing/here")}, "HTTP 404"},
		{"origin refused", Config{URL: srv.URL("/ws"), Header: map[string][]string{"Origin": {"http://evil.example"}}}, "HTTP 403"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Dial(ctx(t), tt.cfg)
			if err == nil {
				c.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want %q in it", err, tt.want)
			}
		})
	}
}

// TestReconnectAfterDropMissesNothing cuts the client's connection (through
// a proxy, the server stays up), posts while it is away, and checks that
// it gets every message of both its rooms once, in order.
func TestReconnectAfterDropMissesNothing(t *testing.T) {
	srv := servertest.Start(t, nil)
	proxy := testsupport.NewProxy(t, srv.Addr())
	reader := dial(t, proxy.URL("/ws"), "main", "reader")
	connected(t, reader)
	if err := reader.Join(ctx(t), "side"); err != nil {
		t.Fatal(err)
	}
	next[*Joined](t, reader, func(j *Joined) bool { return j.Room == "side" }, nil)
	writer := dial(t, srv.URL("/ws"), "main", "writer")
	connected(t, writer)
	if err := writer.Join(ctx(t), "side"); err != nil {
		t.Fatal(err)
	}
	next[*Joined](t, writer, func(j *Joined) bool { return j.Room == "side" }, nil)

	post := func(from, to int) {
		for i := from; i <= to; i++ {
			send(t, writer, "main", fmt.Sprintf("m%d", i))
			send(t, writer, "side", fmt.Sprintf("s%d", i))
		}
		if err := writer.Flush(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	post(1, 3)
	var main, side []*Message
	collect := func(ev Event) {
		if m, ok := ev.(*Message); ok {
			if m.Room == "main" {
				main = append(main, m)
			} else {
				side = append(side, m)
			}
		}
	}
	next(t, reader, func(m *Message) bool { collect(m); return m.Room == "side" && m.Seq == 3 }, nil)

	proxy.Refuse(true)
	proxy.Drop()
	next(t, reader, func(s *State) bool { return s.State == Disconnected }, collect)
	// Fails at least once: the proxy refuses.
	next(t, reader, func(s *State) bool { return s.State == Reconnecting && s.Attempt >= 2 }, collect)
	post(4, 8)
	proxy.Refuse(false)
	next(t, reader, func(s *State) bool { return s.State == Connected }, collect)
	post(9, 10)
	next(t, reader, func(m *Message) bool { collect(m); return m.Room == "side" && m.Seq == 10 }, func(ev Event) {
		collect(ev)
		if s, ok := ev.(*State); ok {
			t.Errorf("unexpected %v", s.State)
		}
	})
	want := func(p string) string {
		var ms []string
		for i := 1; i <= 10; i++ {
			ms = append(ms, fmt.Sprintf("%d:%s%d", i, p, i))
		}
		return strings.Join(ms, " ")
	}
	if got := seqTexts(main); got != want("m") {
		t.Errorf("main:\n got %s\nwant %s", got, want("m"))
	}
	if got := seqTexts(side); got != want("s") {
		t.Errorf("side:\n got %s\nwant %s", got, want("s"))
	}
	if proxy.Accepted() != 2 {
		t.Errorf("proxy forwarded %d connections, want 2", proxy.Accepted())
	}
}

// TestUnconfirmedMessagesAreDeliveredOnce breaks the connection after the
// client wrote a message and before its echo came back, once when the server
// got the message and once when it did not: each time the room gets it once.
func TestUnconfirmedMessagesAreDeliveredOnce(t *testing.T) {
	tests := []struct {
		name               string
		toServer, toClient bool // what the proxy loses before the drop
	}{
		{"echo lost, message taken", false, true},
		{"message lost", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := servertest.Start(t, nil)
			proxy := testsupport.NewProxy(t, srv.Addr())
			alice := dial(t, proxy.URL("/ws"), "r", "alice")
			connected(t, alice)
			watcher := dial(t, srv.URL("/ws"), "r", "watcher")
			connected(t, watcher)

			send(t, alice, "r", "before")
			next[*Message](t, watcher, nil, nil)
			next[*Message](t, alice, nil, nil)
			if err := alice.Flush(ctx(t)); err != nil {
				t.Fatal(err)
			}

			proxy.Stall(tt.toServer, tt.toClient)
			send(t, alice, "r", "in doubt")
			if tt.toClient {
				// The server took it: the watcher sees it, alice does not.
				if m := next[*Message](t, watcher, nil, nil); m.Text != "in doubt" || m.Seq != 2 {
					t.Fatalf("watcher got %+v", m)
				}
			}
			if alice.Pending() != 1 {
				t.Fatalf("%d pending, want 1", alice.Pending())
			}
			proxy.Drop()
			proxy.Stall(false, false)
			if err := alice.Flush(ctx(t)); err != nil {
				t.Fatalf("flush: %v", err)
			}
			send(t, alice, "r", "after")
			got := messages(t, alice, "r", 3)
			if s := seqTexts(got); s != "2:in doubt 3:after" {
				t.Errorf("alice got %s", s)
			}
			for _, m := range got {
				if !m.Own {
					t.Errorf("not marked own: %+v", m)
				}
			}
			var w []*Message
			if !tt.toClient {
				w = append(w, messages(t, watcher, "r", 2)...)
			}
			w = append(w, messages(t, watcher, "r", 3)...)
			if s := seqTexts(w); s != "2:in doubt 3:after" && !(tt.toClient && s == "3:after") {
				t.Errorf("watcher got %s", s)
			}
		})
	}
}

// TestReconnectAfterServerRestart stops the server (clients get 1001) and
// starts a new one on the same address: rooms and history are gone, so the
// client gets a history_gap with Reset, and messages of the new room
// (seq from 1 again) flow.
func TestReconnectAfterServerRestart(t *testing.T) {
	srv := servertest.Start(t, nil)
	a := dial(t, srv.URL("/ws"), "r", "a")
	connected(t, a)
	for i := 1; i <= 3; i++ {
		send(t, a, "r", fmt.Sprintf("old%d", i))
	}
	messages(t, a, "r", 3)

	srv.Restart()
	s := next(t, a, func(s *State) bool { return s.State == Disconnected }, nil)
	if websocket.CloseStatus(s.Err) != websocket.StatusGoingAway {
		t.Errorf("disconnected because %v, want close 1001", s.Err)
	}
	// The room is new: joined with history 0 makes the client ready, and
	// the gap frame follows.
	var gap *HistoryGap
	next(t, a, func(s *State) bool { return s.State == Connected }, func(ev Event) {
		if g, ok := ev.(*HistoryGap); ok {
			gap = g
		}
	})
	if gap == nil {
		gap = next[*HistoryGap](t, a, nil, nil)
	}
	if gap.Room != "r" || gap.Since != 3 || !gap.Reset {
		t.Errorf("gap %+v", gap)
	}
	b := dial(t, srv.URL("/ws"), "r", "b")
	connected(t, b)
	send(t, b, "r", "new1")
	if err := b.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	send(t, a, "r", "new2")
	if got := seqTexts(messages(t, a, "r", 2)); got != "1:new1 2:new2" {
		t.Errorf("after restart a got %s", got)
	}
	if seq, _ := a.LastSeq("r"); seq != 2 {
		t.Errorf("last seq %d", seq)
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	srv := servertest.Start(t, nil)
	c, err := Dial(ctx(t), Config{URL: srv.URL("/ws"), Backoff: fast, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	connected(t, c)
	srv.Stop()
	var last *State
	for ev := range c.Events() {
		if s, ok := ev.(*State); ok {
			last = s
		}
	}
	<-c.Done()
	if last == nil || last.State != Closed || last.Err == nil || !strings.Contains(last.Err.Error(), "gave up after 2 reconnect attempts") {
		t.Errorf("last state %+v", last)
	}
	if c.Err() == nil {
		t.Error("Err() is nil")
	}
	if _, err := c.Send(ctx(t), "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("send: %v", err)
	}
}

func TestCloseWhileReconnecting(t *testing.T) {
	srv := servertest.Start(t, nil)
	c, err := Dial(ctx(t), Config{URL: srv.URL("/ws"), Backoff: Backoff{Initial: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	connected(t, c)
	srv.Stop()
	next(t, c, func(s *State) bool { return s.State == Reconnecting }, nil)
	sendErr := make(chan error, 1)
	go func() { _, err := c.Send(context.Background(), "waits"); sendErr <- err }()
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("close took %v", d)
	}
	if err := <-sendErr; !errors.Is(err, ErrClosed) {
		t.Errorf("waiting send: %v", err)
	}
}

// TestRoomsSurviveReconnect leaves the URL room and joins two others; after
// a drop the client reconnects into one of those, joins the other, and gets
// what it missed in both, and nothing of the room it left.
func TestRoomsSurviveReconnect(t *testing.T) {
	srv := servertest.Start(t, nil)
	proxy := testsupport.NewProxy(t, srv.Addr())
	c := dial(t, proxy.URL("/ws"), "first", "c")
	connected(t, c)
	for _, r := range []string{"b", "a"} {
		if err := c.Join(ctx(t), r); err != nil {
			t.Fatal(err)
		}
		next(t, c, func(j *Joined) bool { return j.Room == r }, nil)
	}
	if err := c.Leave(ctx(t), "first"); err != nil {
		t.Fatal(err)
	}
	next[*Left](t, c, nil, nil)
	w := dial(t, srv.URL("/ws"), "first", "w")
	connected(t, w)
	for _, r := range []string{"a", "b"} {
		if err := w.Join(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}

	proxy.Refuse(true)
	proxy.Drop()
	next(t, c, func(s *State) bool { return s.State == Reconnecting }, nil)
	send(t, w, "first", "not for c")
	send(t, w, "a", "a1")
	send(t, w, "b", "b1")
	if err := w.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	proxy.Refuse(false)
	var got []string
	next(t, c, func(s *State) bool { return s.State == Connected }, func(ev Event) {
		switch e := ev.(type) {
		case *Joined:
			got = append(got, "joined "+e.Room)
		case *Message:
			got = append(got, e.Room+":"+e.Text)
		}
	})
	// "a" is the URL room now (first of the rooms, sorted), then b is joined.
	if s := strings.Join(got, " "); s != "joined a a:a1 joined b b:b1" {
		t.Errorf("after reconnect: %s", s)
	}
	if s := fmt.Sprint(c.Rooms()); s != "[a b]" {
		t.Errorf("rooms %s", s)
	}
	if _, err := c.Send(ctx(t), "x"); !errors.Is(err, ErrNotJoined) {
		t.Errorf("send to the left URL room: %v", err)
	}
}

// The server restarts (a new stream of the room) and the new room passes the
// client's last seq before the client is back: with the epoch the client
// sent, it gets a gap with Reset and the whole new stream, not a silent
// replay from its old seq (issue 18).
func TestResumeIntoANewStreamThatWentFurther(t *testing.T) {
	srv := servertest.Start(t, nil)
	px := testsupport.NewProxy(t, srv.Addr())
	a := dial(t, px.URL("/ws"), "r", "a")
	connected(t, a)
	for i := 1; i <= 3; i++ {
		send(t, a, "r", fmt.Sprintf("old%d", i))
	}
	messages(t, a, "r", 3)

	px.Refuse(true) // a stays away until the new room is ahead of it
	srv.Restart()
	next(t, a, func(s *State) bool { return s.State == Disconnected }, nil)
	b := dial(t, srv.URL("/ws"), "r", "b")
	connected(t, b)
	for i := 1; i <= 5; i++ {
		send(t, b, "r", fmt.Sprintf("new%d", i))
	}
	if err := b.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	px.Refuse(false)
	var gap *HistoryGap
	var got []*Message
	next(t, a, func(s *State) bool { return s.State == Connected }, func(ev Event) {
		switch e := ev.(type) {
		case *HistoryGap:
			gap = e
		case *Message:
			got = append(got, e)
		}
	})
	if gap == nil || !gap.Reset {
		t.Fatalf("gap %+v: the client resumed into another stream without knowing", gap)
	}
	if len(got) == 0 || got[len(got)-1].Seq < 5 {
		got = append(got, messages(t, a, "r", 5)...)
	}
	if s := seqTexts(got); s != "1:new1 2:new2 3:new3 4:new4 5:new5" {
		t.Errorf("after the restart a got %s", s)
	}
}

// A backend that disconnects the user through the server API (close 4001)
// means it: the client ends instead of coming back.
func TestDisconnectedByTheServerAPIEndsTheClient(t *testing.T) {
	const key = "client-test-api-key-0123"
	srv := servertest.Start(t, func(c *server.Config) { c.APIKey = key })
	c, err := Dial(ctx(t), Config{URL: srv.URL("/ws"), Room: "r", Sender: "eve", Backoff: fast})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	connected(t, c)
	req, _ := http.NewRequest("POST", srv.HTTPURL("/api/users/eve/disconnect"), strings.NewReader(`{"reason":"banned"}`))
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("disconnect: %v %v", resp, err)
	}
	resp.Body.Close()
	var states []string
	var last *State
	deadline := time.After(10 * time.Second)
	for ended := false; !ended; {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				ended = true
				break
			}
			if s, ok := ev.(*State); ok {
				states = append(states, s.State.String())
				last = s
			}
		case <-deadline:
			t.Fatalf("the client did not end within 10s: states %v", states)
		}
	}
	var ce *ConnError
	if last == nil || last.State != Closed || !errors.As(last.Err, &ce) || ce.Code != CloseDisconnected || ce.Reason != "banned" {
		t.Errorf("last state %+v, want Closed with 4001 banned", last)
	}
	if slices.Contains(states, Reconnecting.String()) {
		t.Errorf("the client tried to come back: %v", states)
	}
}
