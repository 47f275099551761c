//go:build linux

package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	gws "github.com/gobwas/ws"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/testsupport"
)

const hookSecret = "the hooks' shared secret, 32 b."

// hookBackend is the application's backend: a real HTTP server that checks
// each request's signature and answers with decide, keeping the requests.
type hookBackend struct {
	*httptest.Server
	mu   sync.Mutex
	reqs map[string][]map[string]any // by hook
}

func newHookBackend(t *testing.T, decide func(hook string, req map[string]any) any) *hookBackend {
	t.Helper()
	b := &hookBackend{reqs: map[string][]map[string]any{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read a hook's body: %v", err)
			return
		}
		if !hooks.Verify(hookSecret, body, r.Header.Get(hooks.HeaderSignature)) {
			t.Errorf("a %s hook request is not signed right", r.Header.Get(hooks.HeaderHook))
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("a hook request is not JSON: %v", err)
			return
		}
		hook, _ := req["hook"].(string)
		if hook != r.Header.Get(hooks.HeaderHook) || r.Header.Get(hooks.HeaderNode) == "" || req["node"] != r.Header.Get(hooks.HeaderNode) {
			t.Errorf("hook %q, headers %v", hook, r.Header)
		}
		b.mu.Lock()
		b.reqs[hook] = append(b.reqs[hook], req)
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(decide(hook, req)); err != nil {
			t.Errorf("answer: %v", err)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *hookBackend) requests(hook string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.reqs[hook]...)
}

// hooksOn turns on the hooks named, all at url.
func hooksOn(url string, kinds ...hooks.Kind) func(*Config) {
	return func(c *Config) {
		c.Hooks.Secret = hookSecret
		for _, k := range kinds {
			switch k {
			case hooks.Connect:
				c.Hooks.ConnectURL = url + "/connect"
			case hooks.Join:
				c.Hooks.JoinURL = url + "/join"
			case hooks.Publish:
				c.Hooks.PublishURL = url + "/publish"
			}
		}
	}
}

// tryDialPlain dials as a five-field client (no subprotocol).
func tryDialPlain(url string) error {
	conn, _, _, err := gws.Dialer{Timeout: 5 * time.Second}.Dial(context.Background(), url)
	if err == nil {
		conn.Close()
	}
	return err
}

func hookOutcomes(ts *testServer, hook string) map[string]uint64 {
	m := map[string]uint64{}
	for _, st := range ts.Stats().Hooks {
		if st.Hook == hook {
			for o, n := range st.Outcomes {
				if n > 0 {
					m[hooks.Outcome(o).String()] = n
				}
			}
		}
	}
	return m
}

func TestHookConnect(t *testing.T) {
	b := newHookBackend(t, func(hook string, req map[string]any) any {
		switch {
		case hook == "publish":
			return map[string]any{"allow": true}
		case req["name"] == "mallory":
			return map[string]any{"allow": false, "reason": "mallory is banned", "status": 403}
		}
		return map[string]any{"allow": true, "user": "ann (verified)", "data": map[string]any{"plan": "pro"}, "rooms": []string{"side"}}
	})
	ts := startServer(t, hooksOn(b.URL, hooks.Connect, hooks.Publish))

	// A subprotocol client sees the refusal as a close frame: 4000 + status.
	c := dial(t, ts.url("/ws/lobby?name=mallory"))
	f, err := c.readFrame(5 * time.Second)
	if err != nil || f.Header.OpCode != gws.OpClose {
		t.Fatalf("want a close frame, got %v %v", f.Header.OpCode, err)
	}
	if code, reason := closeOf(f); code != 4403 || reason != "mallory is banned" {
		t.Errorf("close %d %q", code, reason)
	}
	// A five-field client gets the HTTP status.
	if err := tryDialPlain(ts.url("/ws/lobby?name=mallory")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("five-field client: %v, want 403", err)
	}
	if n := ts.Stats().Refused["hook"]; n != 2 {
		t.Errorf("refused by a hook: %d", n)
	}

	// Allowed: the backend names the user and a room to join besides the URL's.
	c = dial(t, ts.url("/ws/lobby?name=ann"))
	c.joined()
	if j, _ := c.joined(); j["room"] != "side" {
		t.Fatalf("joined %v, want the hook's room side", j)
	}
	c.sendJSON(msg("hi", "room", "side", "sender", "someone else"))
	if m := c.next(); m["sender"] != "ann (verified)" || m["room"] != "side" {
		t.Errorf("message %v: the sender is the hook's user", m)
	}
	reqs := b.requests("connect")
	if last := reqs[len(reqs)-1]; last["room"] != "lobby" || last["name"] != "ann" || last["remote"] != "127.0.0.1" {
		t.Errorf("connect request %v", last)
	}
	pubs := b.requests("publish")
	if len(pubs) != 1 || pubs[0]["user"] != "ann (verified)" || pubs[0]["data"].(map[string]any)["plan"] != "pro" || pubs[0]["room"] != "side" ||
		!strings.HasPrefix(pubs[0]["connection"].(string), ts.id+"-") {
		t.Errorf("publish requests %v: the connect hook's data comes back", pubs)
	}
	if got := hookOutcomes(ts, "connect"); got["allowed"] != 1 || got["refused"] != 2 {
		t.Errorf("connect outcomes %v", got)
	}
}

func TestHookJoin(t *testing.T) {
	b := newHookBackend(t, func(_ string, req map[string]any) any {
		if strings.HasPrefix(req["room"].(string), "private") {
			return map[string]any{"allow": false, "reason": "members only"}
		}
		return map[string]any{"allow": true}
	})
	ts := startServer(t, hooksOn(b.URL, hooks.Join))
	c := dial(t, ts.url("/ws/lobby?name=bob"))
	c.joined()
	c.sendJSON(map[string]any{"type": "join", "room": "private1"})
	if e := c.next(); e["type"] != "error" || e["code"] != CodeRefused || e["message"] != "members only" || e["room"] != "private1" {
		t.Errorf("refused join: %v", e)
	}
	c.sendJSON(map[string]any{"type": "join", "room": "open"})
	if j, _ := c.joined(); j["room"] != "open" {
		t.Errorf("allowed join: %v", j)
	}
	// The URL's room asks the join hook too, before the upgrade.
	c = dial(t, ts.url("/ws/private2"))
	if code := c.expectClose(); code != 4403 {
		t.Errorf("URL room refused: close %d", code)
	}
	joins := b.requests("join")
	if len(joins) != 4 || joins[1]["user"] != "" || joins[1]["name"] != "bob" || joins[1]["room"] != "private1" || joins[1]["connection"] == "" {
		t.Errorf("join requests %v", joins)
	}
	if n := ts.Stats().Dropped["hook"]; n != 1 {
		t.Errorf("dropped by a hook: %d", n)
	}
}

func TestHookPublish(t *testing.T) {
	b := newHookBackend(t, func(_ string, req map[string]any) any {
		m := req["message"].(map[string]any)
		text := m["text"].(string)
		switch {
		case strings.Contains(text, "spam"):
			return map[string]any{"allow": false, "reason": "no spam here"}
		case strings.Contains(text, "darn"):
			return map[string]any{"allow": true, "message": map[string]any{"text": strings.ReplaceAll(text, "darn", "d**n")}}
		}
		return map[string]any{"allow": true}
	})
	ts := startServer(t, hooksOn(b.URL, hooks.Publish))
	c := connect(t, ts, "lobby")
	other := connect(t, ts, "lobby")
	c.sendJSON(msg("buy spam", "message_id", 1))
	if e := c.next(); e["type"] != "error" || e["code"] != CodeRefused || e["message"] != "no spam here" || e["message_id"] != float64(1) {
		t.Errorf("refused: %v", e)
	}
	// A connection's messages keep their order through the hook, the
	// replaced ones and the refused ones with them.
	var want []string
	for i := range 20 {
		text := []string{"hello", "oh darn", "spam!"}[i%3]
		c.sendJSON(msg(text, "message_id", 100+i))
		if text == "oh darn" {
			text = "oh d**n"
		}
		if text != "spam!" {
			want = append(want, text)
		}
	}
	var got []string
	var seq float64
	for len(got) < len(want) {
		m := other.next()
		if m["type"] != nil {
			t.Fatalf("other member got %v", m)
		}
		if m["seq"].(float64) <= seq {
			t.Errorf("seq %v after %v", m["seq"], seq)
		}
		seq = m["seq"].(float64)
		got = append(got, m["text"].(string))
		if m["text"] == "oh d**n" && m["message_id"] == nil {
			t.Errorf("a replaced message lost its message_id: %v", m)
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if o := hookOutcomes(ts, "publish"); o["allowed"] != 7 || o["replaced"] != 7 || o["refused"] != 7 {
		t.Errorf("publish outcomes %v", o)
	}
}

// downURL is an address where nothing listens.
func downURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}

func TestHookBackendDown(t *testing.T) {
	for _, mode := range []hooks.Mode{hooks.FailClosed, hooks.FailOpen} {
		t.Run("fail "+mode.String(), func(t *testing.T) {
			ts := startServer(t, func(c *Config) {
				hooksOn(downURL(t), hooks.Publish, hooks.Join)(c)
				c.Hooks.SetFail(mode)
			})
			// The join hook of the URL's room fails too.
			c, err := tryDial(t, ts.url("/ws/lobby"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if mode == hooks.FailClosed {
				if code := c.expectClose(); code != 4503 {
					t.Errorf("close %d, want 4503", code)
				}
				if err := tryDialPlain(ts.url("/ws/lobby")); err == nil || !strings.Contains(err.Error(), "503") {
					t.Errorf("five-field client: %v, want 503", err)
				}
				return
			}
			c.joined()
			c.sendJSON(msg("still here", "message_id", 5))
			if m := c.next(); m["text"] != "still here" || m["seq"] != float64(1) {
				t.Errorf("fail open publishes unchanged: %v", m)
			}
			if o := hookOutcomes(ts, "publish"); o["error"] != 1 {
				t.Errorf("outcomes %v", o)
			}
		})
	}
}

func TestHookBackendDownRefusesMessages(t *testing.T) {
	ts := startServer(t, hooksOn(downURL(t), hooks.Publish))
	c := connect(t, ts, "lobby")
	c.sendJSON(msg("into the void", "message_id", 5))
	if e := c.next(); e["type"] != "error" || e["code"] != "unavailable" || e["message"] != hooks.FailReason || e["message_id"] != float64(5) {
		t.Errorf("fail closed: %v", e)
	}
}

// TestHookBreaker: a backend that never answers costs one timeout, then
// the circuit is open and messages are refused at once, without calls.
func TestHookBreaker(t *testing.T) {
	release := make(chan struct{})
	b := newHookBackend(t, func(string, map[string]any) any {
		<-release
		return map[string]any{"allow": true}
	})
	defer close(release) // before the backend closes: it waits for its handlers
	const timeout = 300 * time.Millisecond
	ts := startServer(t, func(c *Config) {
		hooksOn(b.URL, hooks.Publish)(c)
		c.Hooks.Timeout, c.Hooks.Failures, c.Hooks.Cooldown = timeout, 1, time.Minute
	})
	c := connect(t, ts, "lobby")
	start := time.Now()
	const n = 10
	for i := range n {
		c.sendJSON(msg("x", "message_id", i))
	}
	for i := range n {
		if e := c.next(); e["code"] != "unavailable" || e["message_id"] != float64(i) {
			t.Fatalf("message %d: %v", i, e)
		}
	}
	if d := time.Since(start); d < timeout || d > timeout+time.Second {
		t.Errorf("%d messages refused in %v: want one timeout (%v), not one per message", n, d, timeout)
	}
	if calls := len(b.requests("publish")); calls != 1 {
		t.Errorf("the backend got %d calls, want 1", calls)
	}
	if o := hookOutcomes(ts, "publish"); o["timeout"] != 1 || o["open_circuit"] != n-1 {
		t.Errorf("outcomes %v", o)
	}
}

// TestUserRuleEveryEntry: one rule for user names, from every entry that
// names one.
func TestUserRuleEveryEntry(t *testing.T) {
	bad := []string{"\u202eann", strings.Repeat("a", 100), "\u0007\n", "a\u200bb", " ann"}
	t.Run("name", func(t *testing.T) {
		ts := startServer(t, nil)
		for _, name := range bad {
			_, err := tryDial(t, ts.url("/ws/a?name="+url.QueryEscape(name)), nil)
			if err == nil || !strings.Contains(err.Error(), "400") {
				t.Errorf("?name=%q: %v, want 400", name, err)
			}
		}
		dial(t, ts.url("/ws/a?name=Zo%C3%AB")).joined()
	})
	t.Run("token sub", func(t *testing.T) {
		ts := startAuthServer(t)
		for _, name := range bad {
			tok, err := auth.MintHS256(testSecret, name, nil, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tryDial(t, ts.url("/ws/a?token="+tok), nil); err == nil || !strings.Contains(err.Error(), "401") {
				t.Errorf("sub %q: %v, want 401", name, err)
			}
		}
	})
	t.Run("connect hook", func(t *testing.T) {
		var mu sync.Mutex
		next := ""
		b := newHookBackend(t, func(string, map[string]any) any {
			mu.Lock()
			defer mu.Unlock()
			return map[string]any{"allow": true, "user": next}
		})
		ts := startServer(t, hooksOn(b.URL, hooks.Connect))
		for _, name := range bad {
			mu.Lock()
			next = name
			mu.Unlock()
			if err := tryDialPlain(ts.url("/ws/a")); err == nil || !strings.Contains(err.Error(), "503") {
				t.Errorf("hook user %q: %v, want 503 (an answer the server cannot apply is a failed call)", name, err)
			}
		}
		if o := hookOutcomes(ts, "connect"); o["error"] != uint64(len(bad)) {
			t.Errorf("outcomes %v", o)
		}
	})
	t.Run("server API", func(t *testing.T) {
		ts := startServer(t, func(c *Config) { c.APIKey = testAPIKey })
		for _, name := range bad {
			if code, m := api(t, ts, "POST", "/api/users/"+url.PathEscape(name)+"/disconnect", ""); code != 400 || !strings.Contains(m["message"].(string), "user") {
				t.Errorf("user %q: %d %v", name, code, m)
			}
		}
	})
}

// TestHooksOnTheHTTPTransport: polls and POSTs ask the same hooks as a
// WebSocket connection; a private room cannot be read by polling.
func TestHooksOnTheHTTPTransport(t *testing.T) {
	b := newHookBackend(t, func(hook string, req map[string]any) any {
		switch hook {
		case "connect":
			if req["name"] == "mallory" {
				return map[string]any{"allow": false, "reason": "mallory is banned", "status": 401}
			}
			return map[string]any{"allow": true, "user": "poster"}
		case "join":
			if req["room"] == "private" {
				return map[string]any{"allow": false, "reason": "members only"}
			}
			return map[string]any{"allow": true}
		}
		m := req["message"].(map[string]any)
		if m["text"] == "spam" {
			return map[string]any{"allow": false, "reason": "no spam here"}
		}
		return map[string]any{"allow": true, "message": map[string]any{"text": "[" + m["text"].(string) + "]"}}
	})
	ts := startServer(t, hooksOn(b.URL, hooks.Connect, hooks.Join, hooks.Publish))
	if _, code := poll(t, ts.addr, "private", ""); code != http.StatusForbidden {
		t.Errorf("poll of a private room: %d", code)
	}
	if _, code := poll(t, ts.addr, "lobby", "?name=mallory"); code != http.StatusUnauthorized {
		t.Errorf("poll by a banned user: %d", code)
	}
	if code, m := post(t, ts.addr, "private", msg("hi"), nil); code != http.StatusForbidden || m["code"] != CodeRefused || m["message"] != "members only" {
		t.Errorf("post to a private room: %d %v", code, m)
	}
	if code, m := post(t, ts.addr, "lobby", msg("spam", "message_id", 3), nil); code != http.StatusForbidden || m["code"] != CodeRefused || m["message_id"] != float64(3) {
		t.Errorf("refused post: %d %v", code, m)
	}
	if code, m := post(t, ts.addr, "lobby", msg("hello", "message_id", 4, "sender", "anyone"), nil); code != http.StatusAccepted || m["message_id"] != float64(4) {
		t.Fatalf("post: %d %v", code, m)
	}
	a, code := poll(t, ts.addr, "lobby", "?since=0")
	if code != 200 || len(a.Messages) != 1 || a.Messages[0]["text"] != "[hello]" || a.Messages[0]["sender"] != "poster" {
		t.Errorf("poll: %d %+v: want the replaced message, sent by the hook's user", code, a)
	}
}

// TestHooksOnACluster: on two nodes sharing a real Redis, each node asks
// the backend for its own connections, the calling node named; a message
// the backend replaced on one node is the one every node delivers, and one
// it refused reaches nobody.
func TestHooksOnACluster(t *testing.T) {
	b := newHookBackend(t, func(hook string, req map[string]any) any {
		switch hook {
		case "join":
			return map[string]any{"allow": req["room"] != "private"}
		case "publish":
			text := req["message"].(map[string]any)["text"].(string)
			if text == "spam" {
				return map[string]any{"allow": false, "reason": "no spam here"}
			}
			return map[string]any{"allow": true, "message": map[string]any{"text": "<" + text + ">"}}
		}
		return map[string]any{"allow": true}
	})
	nodes := startCluster(t, testsupport.StartRedis(t).URL(), 2, hooksOn(b.URL, hooks.Join, hooks.Publish))
	a, c := connect(t, nodes[0], "x"), connect(t, nodes[1], "x")
	a.sendJSON(msg("spam", "message_id", 1))
	if e := a.next(); e["code"] != CodeRefused {
		t.Fatalf("refused on node 0: %v", e)
	}
	a.sendJSON(msg("from 0"))
	c.sendJSON(msg("from 1"))
	for i, cl := range []*client{a, c} {
		got := map[string]bool{}
		for range 2 {
			got[cl.next()["text"].(string)] = true
		}
		if !got["<from 0>"] || !got["<from 1>"] {
			t.Errorf("node %d's member got %v: want both messages as the backend replaced them", i, got)
		}
	}
	c.sendJSON(map[string]any{"type": "join", "room": "private"})
	if e := c.next(); e["code"] != CodeRefused || e["room"] != "private" {
		t.Errorf("join refused on node 1: %v", e)
	}
	callers := map[string]bool{}
	for _, req := range b.requests("publish") {
		callers[req["node"].(string)] = true
	}
	if !callers[nodes[0].id] || !callers[nodes[1].id] || len(callers) != 2 {
		t.Errorf("publish calls came from %v, want each node for its own connections (%s, %s)", callers, nodes[0].id, nodes[1].id)
	}
}
