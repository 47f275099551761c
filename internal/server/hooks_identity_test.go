//go:build linux

package server

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestHookUserIsVerifiedOnEveryTransport: the join and publish hooks get
// one notion of the user on WebSocket and HTTP alike: a verified identity
// (here the connect hook's user) as user, or user "" with the client's
// unverified ?name= as name, never the name called user.
func TestHookUserIsVerifiedOnEveryTransport(t *testing.T) {
	b := newHookBackend(t, func(hook string, req map[string]any) any {
		if hook == "connect" && req["name"] == "vera" {
			return map[string]any{"allow": true, "user": "vera-verified"}
		}
		return map[string]any{"allow": true}
	})
	ts := startServer(t, hooksOn(b.URL, hooks.Connect, hooks.Join, hooks.Publish))
	for _, tc := range []struct{ name, user, wantName string }{
		{"ann", "", "ann"},            // nobody verified ann: she is a name
		{"vera", "vera-verified", ""}, // the backend said who she is
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := map[string]int{"connect": len(b.requests("connect")), "join": len(b.requests("join")), "publish": len(b.requests("publish"))}
			c := dial(t, ts.url("/ws/lobby?name="+tc.name))
			c.joined()
			c.sendJSON(map[string]any{"type": "join", "room": "side-" + tc.name})
			c.joined()
			c.sendJSON(msg("hi", "room", "side-"+tc.name))
			c.nextChat()
			if _, code := poll(t, ts.addr, "lobby", "?since=0&name="+tc.name); code != 200 {
				t.Fatalf("poll: %d", code)
			}
			resp, err := http.Post("http://"+ts.addr+"/rooms/lobby/messages?name="+tc.name, "application/json", strings.NewReader(`{"text":"posted"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST: %d", resp.StatusCode)
			}
			// WebSocket: the URL's room and the join frame; HTTP: the poll
			// and the POST.
			for hook, want := range map[string]int{"join": 4, "publish": 2} {
				reqs := b.requests(hook)[from[hook]:]
				if len(reqs) != want {
					t.Errorf("%d %s calls, want %d", len(reqs), hook, want)
				}
				for _, r := range reqs {
					if r["user"] != tc.user || (r["name"] != nil || tc.wantName != "") && r["name"] != tc.wantName {
						t.Errorf("a %s call with user %q and name %v, want user %q and name %q", hook, r["user"], r["name"], tc.user, tc.wantName)
					}
				}
			}
			for _, r := range b.requests("connect")[from["connect"]:] {
				if r["user"] != "" || r["name"] != tc.name {
					t.Errorf("a connect call with user %q and name %q, want \"\" and %q", r["user"], r["name"], tc.name)
				}
			}
		})
	}
}

// TestConnectHookRoomsCheckedLikeAnyJoin: the rooms a connect hook names
// are joined without asking the join hook, but the token's rooms claim and
// the rooms' namespaces hold as for a join frame: a room the token does
// not name, a join_token namespace, a namespace not configured are each
// refused with the join frame's error; the room that passes is joined.
func TestConnectHookRoomsCheckedLikeAnyJoin(t *testing.T) {
	b := newHookBackend(t, func(string, map[string]any) any {
		return map[string]any{"allow": true, "rooms": []string{"sealed:a", "nowhere:x", "plain:c", "plain:b"}}
	})
	v, err := auth.NewHS256(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *Config) {
		hooksOn(b.URL, hooks.Connect)(c)
		c.Auth, c.Namespaces, c.MaxRoomsPerConn = v, testNamespaces(), 10
	})
	c := dial(t, ts.url("/ws/lobby?token="+mint(t, "ann", []string{"lobby", "plain:b", "nowhere:x"}, time.Hour)))
	c.joined()
	want := []string{"error forbidden sealed:a", "error invalid_room nowhere:x", "error forbidden plain:c", "joined plain:b"}
	for i, w := range want {
		f := c.next()
		got := f["type"].(string)
		if code, ok := f["code"].(string); ok {
			got += " " + code
		}
		got += " " + f["room"].(string)
		if got != w {
			t.Errorf("frame %d: %v, want %s", i, f, w)
		}
	}
}

// TestHookJobsOfClosedConnectionsAreDropped: with the one hook worker
// busy, five connections queue a message each and close; a worker drops
// their jobs without calling the backend, and a new connection's message
// is the next call, not behind five.
func TestHookJobsOfClosedConnectionsAreDropped(t *testing.T) {
	b, inCall, let := heldBackend(t)
	defer let() // a failed test does not leave the backend holding the server's stop
	ts := startServer(t, func(c *Config) {
		hooksOn(b.URL, hooks.Publish)(c)
		c.Hooks.Workers, c.Hooks.Timeout = 1, 30*time.Second
	})
	a := connect(t, ts, "lobby")
	a.sendJSON(msg("first"))
	<-inCall
	var closing []*client
	for range 5 {
		c := connect(t, ts, "lobby")
		c.sendJSON(msg("from a connection about to close"))
		closing = append(closing, c)
	}
	testsupport.Eventually(t, 10*time.Second, "five jobs queued", func() bool { return len(ts.hookJobs) == 5 })
	for _, c := range closing {
		c.conn.Close()
	}
	testsupport.Eventually(t, 10*time.Second, "the five to close", func() bool { return ts.Stats().Connections == 1 })
	live := connect(t, ts, "lobby")
	live.sendJSON(msg("live"))
	let()
	for _, want := range []string{"first", "live"} {
		if m := live.nextChat(); m["text"] != want {
			t.Fatalf("the live connection got %v, want %q", m, want)
		}
	}
	if n := len(b.requests("publish")); n != 2 {
		t.Errorf("the backend got %d publish calls, want 2 (the closed connections' dropped)", n)
	}
	if n := ts.Stats().HookJobsGone; n != 5 {
		t.Errorf("%d jobs dropped, want 5", n)
	}
}

// TestHookQueueBoundedInBytes: a connection's messages waiting for the
// publish hook are bounded in bytes, not only in number: with the first
// one held by the backend, five of 12 KiB fit in 64 KiB, the next three
// are refused with rate_limited; released, the others are published.
func TestHookQueueBoundedInBytes(t *testing.T) {
	b, inCall, let := heldBackend(t)
	defer let() // a failed test does not leave the backend holding the server's stop
	ts := startServer(t, func(c *Config) {
		hooksOn(b.URL, hooks.Publish)(c)
		c.RateLimit, c.RateBurst = 1000, 1000
	})
	c := connect(t, ts, "lobby")
	c.sendJSON(msg("first", "message_id", 0))
	<-inCall
	big := strings.Repeat("x", 12<<10)
	for i := 1; i <= 8; i++ {
		c.sendJSON(msg(big, "message_id", i))
	}
	for i := 6; i <= 8; i++ {
		if e := c.next(); e["type"] != "error" || e["code"] != "rate_limited" || e["message_id"] != float64(i) {
			t.Fatalf("message %d: %v, want rate_limited", i, e)
		}
	}
	let()
	for i := 0; i <= 5; i++ {
		if m := c.nextChat(); m["message_id"] != float64(i) {
			t.Fatalf("published %v, want message %d", m["message_id"], i)
		}
	}
}

// heldBackend is a hook backend that allows everything but holds its first
// call: inCall is closed when that call arrives, let answers it (and may
// be called again).
func heldBackend(t *testing.T) (b *hookBackend, inCall <-chan struct{}, let func()) {
	in, release := make(chan struct{}), make(chan struct{})
	var first, released sync.Once
	b = newHookBackend(t, func(string, map[string]any) any {
		first.Do(func() { close(in); <-release })
		return map[string]any{"allow": true}
	})
	return b, in, func() { released.Do(func() { close(release) }) }
}
