//go:build linux

package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	gws "github.com/gobwas/ws"

	"github.com/scalechat/scalechat/internal/testsupport"
)

func TestBroadcastReachesRoomOnlyWithEcho(t *testing.T) {
	ts := startServer(t, nil)
	a1, a2, a3 := connect(t, ts, "a"), connect(t, ts, "a"), connect(t, ts, "a")
	b := connect(t, ts, "b")

	a1.sendJSON(map[string]any{"message_id": 7, "text": "hello", "sender": "alice", "sent_at": "2026-11-21T10:00:00Z", "mood": []any{1, "x"}})
	for i, c := range []*client{a1, a2, a3} {
		m := c.next()
		if m["text"] != "hello" || m["room"] != "a" || m["seq"] != float64(1) || m["message_id"] != float64(7) ||
			m["sender"] != "alice" || m["sent_at"] != "2026-11-21T10:00:00Z" || fmt.Sprint(m["mood"]) != "[1 x]" {
			t.Errorf("client %d got %v", i, m)
		}
		if _, err := time.Parse(time.RFC3339Nano, m["server_at"].(string)); err != nil {
			t.Errorf("server_at: %v", err)
		}
		if _, ok := m["type"]; ok {
			t.Errorf("chat message carries a type: %v", m)
		}
	}
	// Room b saw nothing of room a: its first chat message is its own.
	b.sendJSON(msg("in b"))
	if m := b.next(); m["text"] != "in b" || m["room"] != "b" || m["seq"] != float64(1) {
		t.Errorf("room b got %v", m)
	}
}

func TestSeqOrderIsOneOrderForAllMembers(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RateLimit, c.RateBurst = 10000, 10000 })
	const members, perSender = 6, 50
	var cs []*client
	for range members {
		cs = append(cs, connect(t, ts, "order"))
	}
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			for j := range perSender {
				c.sendJSON(msg(fmt.Sprintf("%d-%d", i, j)))
			}
		})
	}
	wg.Wait()
	var first []string
	for i, c := range cs {
		var got []string
		for want := 1; want <= members*perSender; want++ {
			m := c.next()
			if m["seq"] != float64(want) {
				t.Fatalf("client %d: want seq %d, got %v", i, want, m)
			}
			got = append(got, m["text"].(string))
		}
		if i == 0 {
			first = got
		} else if strings.Join(got, ",") != strings.Join(first, ",") {
			t.Fatalf("client %d saw another order", i)
		}
	}
}

func TestHistoryReplayAndSince(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.History = 3 })
	tests := []struct {
		name  string
		query string
		texts string
		gap   bool
	}{
		{"last history messages", "", "3,4,5", false},
		{"since inside history", "?since=3", "4,5", false},
		{"since at the end", "?since=5", "", false},
		{"since before history", "?since=1", "3,4,5", true},
		{"since from a previous life of the room", "?since=99", "3,4,5", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			room := fmt.Sprintf("h%d", i)
			w := connect(t, ts, room)
			for i := 1; i <= 5; i++ {
				w.sendJSON(msg(fmt.Sprint(i)))
				w.next()
			}
			c := dial(t, ts.url("/ws/"+room+tt.query))
			j, hist := c.joined(tt.gap)
			if j["seq"] != float64(5) || j["room"] != room || j["members"] != float64(2) {
				t.Errorf("joined = %v", j)
			}
			var texts []string
			for _, m := range hist {
				texts = append(texts, m["text"].(string))
			}
			if strings.Join(texts, ",") != tt.texts {
				t.Errorf("replayed %v, want %s", texts, tt.texts)
			}
			if gap, ok := j["gap"].(map[string]any); ok && (gap["first_seq"] != float64(3) || gap["room"] != room) {
				t.Errorf("gap = %v", gap)
			}
			// Live traffic continues right after the replay, without a duplicate.
			w.sendJSON(msg("live"))
			w.next()
			if m := c.next(); m["text"] != "live" || m["seq"] != float64(6) {
				t.Errorf("after replay got %v", m)
			}
		})
	}
}

func TestHistoryDisabled(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.History = 0 })
	w := connect(t, ts, "nohist")
	w.sendJSON(msg("x"))
	w.next()
	c := dial(t, ts.url("/ws/nohist"))
	if j, hist := c.joined(); len(hist) != 0 || j["history"] != float64(0) || j["seq"] != float64(1) {
		t.Errorf("joined %v with %v", j, hist)
	}
}

func TestJoinLeaveAndPostingRules(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxRoomsPerConn = 2 })
	c := connect(t, ts, "home")
	other := connect(t, ts, "side")
	other.sendJSON(msg("before"))
	other.next()

	c.sendJSON(map[string]any{"type": "join", "room": "side", "since": 0})
	j, hist := c.joined()
	if j["room"] != "side" || j["seq"] != float64(1) || len(hist) != 1 || hist[0]["text"] != "before" {
		t.Fatalf("join side: %v %v", j, hist)
	}
	c.sendJSON(msg("to side", "room", "side", "message_id", 3))
	for _, cl := range []*client{c, other} {
		if m := cl.next(); m["room"] != "side" || m["text"] != "to side" || m["seq"] != float64(2) {
			t.Errorf("got %v", m)
		}
	}
	for _, tt := range []struct {
		frame map[string]any
		code  string
	}{
		{map[string]any{"type": "join", "room": "side"}, "already_joined"},
		{map[string]any{"type": "join", "room": "third"}, "too_many_rooms"},
		{msg("x", "room", "elsewhere", "message_id", 9), "not_joined"},
		{map[string]any{"type": "leave", "room": "elsewhere"}, "not_joined"},
		{map[string]any{"type": "join", "room": "bad room"}, "invalid_room"},
		{map[string]any{"type": "dance"}, "unknown_type"},
	} {
		c.sendJSON(tt.frame)
		e := c.nextOfType("error")
		if e["code"] != tt.code {
			t.Errorf("%v: got %v, want code %s", tt.frame, e, tt.code)
		}
		if id, ok := tt.frame["message_id"]; ok && e["message_id"] != float64(id.(int)) {
			t.Errorf("error frame lacks message_id: %v", e)
		}
	}
	c.sendJSON(map[string]any{"type": "presence", "room": "side"})
	if p := c.nextOfType("presence"); p["members"] != float64(2) {
		t.Errorf("presence = %v", p)
	}
	c.sendJSON(map[string]any{"type": "leave", "room": "home"})
	if l := c.nextOfType("left"); l["room"] != "home" || l["seq"] != float64(0) {
		t.Errorf("left = %v", l)
	}
	c.sendJSON(msg("no room left"))
	if e := c.nextOfType("error"); e["code"] != "not_joined" {
		t.Errorf("got %v", e)
	}
	c.sendJSON(map[string]any{"type": "leave", "room": "side"})
	if l := c.nextOfType("left"); l["seq"] != float64(2) {
		t.Errorf("left = %v", l)
	}
	other.sendJSON(msg("after leave"))
	other.next()
	c.sendJSON(map[string]any{"type": "join", "room": "side", "since": 3})
	if j, hist := c.joined(); j["seq"] != float64(3) || len(hist) != 0 {
		t.Errorf("rejoin: %v %v", j, hist)
	}
}

func TestBadInputKeepsConnectionOpen(t *testing.T) {
	ts := startServer(t, nil)
	c := connect(t, ts, "bad")
	for _, tt := range []struct{ in, code string }{
		{`{"text": "unterminated`, "invalid_json"},
		{`[1,2]`, "invalid_json"},
		{`{"sender":"x"}`, "invalid_message"},
		{`{"text": 5}`, "invalid_message"},
		{`{"text":"x","message_id":-1}`, "invalid_message"},
	} {
		c.sendText(tt.in)
		if e := c.nextOfType("error"); e["code"] != tt.code {
			t.Errorf("%s: got %v, want %s", tt.in, e, tt.code)
		}
	}
	c.sendJSON(msg("still here"))
	if m := c.next(); m["text"] != "still here" {
		t.Errorf("got %v", m)
	}
	st := ts.Stats()
	if st.Dropped["invalid"] != 5 || st.MessagesIn != 6 {
		t.Errorf("stats: dropped %v, messages in %d", st.Dropped, st.MessagesIn)
	}
}

func TestViolationsCloseWithTheRightCode(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxMessageSize = 1024; c.CloseTimeout = 200 * time.Millisecond })
	tests := []struct {
		name  string
		frame gws.Frame
		code  int
	}{
		{"too big", gws.NewTextFrame([]byte(`{"text":"` + strings.Repeat("x", 1100) + `"}`)), 1009},
		{"invalid UTF-8", gws.NewTextFrame([]byte("{\"text\":\"\xff\xfe\"}")), 1007},
		{"binary", gws.NewBinaryFrame([]byte(`{"text":"x"}`)), 1003},
		{"reserved bits", func() gws.Frame { f := gws.NewTextFrame([]byte(`{"text":"x"}`)); f.Header.Rsv = 4; return f }(), 1002},
		{"reserved opcode", gws.NewFrame(gws.OpCode(3), true, nil), 1002},
		{"continuation first", gws.NewFrame(gws.OpContinuation, true, []byte("x")), 1002},
		{"fragmented ping", gws.NewFrame(gws.OpPing, false, nil), 1002},
		{"bad close code", gws.NewCloseFrame([]byte{0x03, 0xe7}), 1002},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := connect(t, ts, "v")
			c.sendRaw(tt.frame)
			if got := c.expectClose(); got != tt.code {
				t.Errorf("close code %d, want %d", got, tt.code)
			}
			c.finishClose()
		})
	}
	t.Run("unmasked", func(t *testing.T) {
		c := connect(t, ts, "v")
		if err := gws.WriteFrame(c.conn, gws.NewTextFrame([]byte(`{"text":"x"}`))); err != nil {
			t.Fatal(err)
		}
		if got := c.expectClose(); got != 1002 {
			t.Errorf("close code %d, want 1002", got)
		}
	})
	t.Run("peer never answers the close", func(t *testing.T) {
		c := connect(t, ts, "v")
		c.sendRaw(gws.NewBinaryFrame(nil))
		if got := c.expectClose(); got != 1003 {
			t.Errorf("close code %d, want 1003", got)
		}
		// CloseTimeout is 200ms: the server gives up waiting and closes.
		if _, err := c.readFrame(5 * time.Second); !errors.Is(err, io.EOF) {
			t.Errorf("want EOF, got %v", err)
		}
	})
	st := ts.Stats()
	for code, n := range map[int]uint64{1009: 1, 1007: 1, 1003: 2, 1002: 6} {
		if st.Disconnects[code] != n {
			t.Errorf("disconnects with %d: %d, want %d", code, st.Disconnects[code], n)
		}
	}
}

func TestFragmentsControlFramesAndCloseHandshake(t *testing.T) {
	ts := startServer(t, nil)
	c := connect(t, ts, "frag")
	c.sendRaw(gws.NewFrame(gws.OpText, false, []byte(`{"text":`)))
	c.sendRaw(gws.NewFrame(gws.OpPing, true, []byte("p1")))
	c.sendRaw(gws.NewFrame(gws.OpContinuation, false, []byte(`"whole`)))
	c.sendRaw(gws.NewFrame(gws.OpContinuation, true, []byte(`"}`)))
	f, err := c.readFrame(5 * time.Second)
	if err != nil || f.Header.OpCode != gws.OpPong || string(f.Payload) != "p1" {
		t.Fatalf("want pong p1, got %v %q %v", f.Header.OpCode, f.Payload, err)
	}
	if m := c.next(); m["text"] != "whole" {
		t.Errorf("got %v", m)
	}
	c.sendRaw(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, "bye")))
	if code := c.expectClose(); code != 1000 {
		t.Errorf("close reply %d", code)
	}
	if _, err := c.readFrame(5 * time.Second); err == nil {
		t.Error("TCP connection still open after the close handshake")
	}
}

func TestRateLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RateLimit, c.RateBurst, c.RateAbuse = 1, 3, 2 })
	c := connect(t, ts, "rate")
	for range 3 {
		c.sendJSON(msg("ok"))
		if m := c.next(); m["text"] != "ok" {
			t.Fatalf("got %v", m)
		}
	}
	for range 2 {
		c.sendJSON(msg("too many", "message_id", 5))
		if e := c.nextOfType("error"); e["code"] != "rate_limited" || e["message_id"] != float64(5) {
			t.Fatalf("got %v", e)
		}
	}
	c.sendJSON(msg("abuse"))
	if code := c.expectClose(); code != 1008 {
		t.Errorf("close code %d, want 1008", code)
	}
	c.finishClose()
	if st := ts.Stats(); st.Dropped["rate_limit"] != 3 || st.Disconnects[1008] != 1 {
		t.Errorf("stats %v %v", st.Dropped, st.Disconnects)
	}
}

func TestRefusalsBeforeUpgrade(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 2; c.AllowedOrigins = []string{"https://chat.example.com"} })
	for _, path := range []string{"/ws/bad%20room", "/ws/" + strings.Repeat("x", 65), "/ws/a/b", "/ws/caf%C3%A9", "/ws/x?since=abc",
		"/ws/x?name=a%01b", "/ws/x?name=" + strings.Repeat("n", 65), "/ws/x?name=%FF", "/ws/x?presence=yes", "/ws/"} {
		if _, err := tryDial(t, ts.url(path), nil); err == nil || !strings.Contains(err.Error(), "400") {
			t.Errorf("%s: got %v, want 400", path, err)
		}
		// A refused request's connection counts against the cap of 2 until
		// the server has seen it close, a moment after the client read
		// the answer: the next dial waits for it.
		testsupport.Eventually(t, 5*time.Second, "the refused request's connection to close", func() bool { return ts.Stats().HTTPConns == 0 })
	}
	if code, _ := httpGet(t, "http://"+ts.addr+"/ws/ok", nil); code != http.StatusUpgradeRequired {
		t.Errorf("plain GET: %d", code)
	}
	// Each refused request's connection counted against the caps until
	// it closed.
	testsupport.Eventually(t, 5*time.Second, "the refused requests' connections to close", func() bool { return ts.Stats().HTTPConns == 0 })
	if _, err := tryDial(t, ts.url("/ws/o"), http.Header{"Origin": {"https://evil.example"}}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("foreign origin: %v", err)
	}
	for _, origin := range []string{"https://chat.example.com", "http://" + ts.addr} {
		c, err := tryDial(t, ts.url("/ws/o"), http.Header{"Origin": {origin}})
		if err != nil {
			t.Fatalf("origin %s: %v", origin, err)
		}
		c.joined()
	}
	if _, err := tryDial(t, ts.url("/ws/o"), nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("third connection with max 2: %v", err)
	}
	st := ts.Stats()
	if st.Refused["bad_request"] != 11 || st.Refused["origin"] != 1 || st.Refused["max_connections"] != 1 || st.Accepted != 2 {
		t.Errorf("refused %v accepted %d", st.Refused, st.Accepted)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	ts := startServer(t, nil)
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := httpGet(t, "http://"+ts.addr+p, nil); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
}

// Presence says who is in the room (the name each client gave, or the
// token's subject) and, to the clients that asked, who comes and goes.
func TestPresence(t *testing.T) {
	ts := startServer(t, nil)
	alice := dial(t, ts.url("/ws/p?name=alice&presence=1"))
	alice.joined()
	if e := alice.nextOfType("presence_join"); e["user"] != "alice" { // her own arrival, as everyone's
		t.Fatalf("alice was told %v", e)
	}
	bob := dial(t, ts.url("/ws/p?name=bob"))
	bob.joined()
	if e := alice.nextOfType("presence_join"); e["user"] != "bob" || e["room"] != "p" {
		t.Fatalf("alice was told %v", e)
	}
	bob2 := dial(t, ts.url("/ws/p?name=bob")) // bob's second connection: no event
	bob2.joined()
	anon := dial(t, ts.url("/ws/p"))
	anon.joined()
	bob.sendJSON(map[string]any{"type": "presence", "room": "p"})
	p := bob.nextOfType("presence")
	want := `[map[connections:1 user:alice] map[connections:2 user:bob]]`
	if p["members"] != float64(4) || p["anonymous"] != float64(1) || fmt.Sprint(p["users"]) != want {
		t.Errorf("presence %v, want 4 members, alice ×1, bob ×2, 1 anonymous", p)
	}
	bob.conn.Close()
	bob2.sendJSON(map[string]any{"type": "leave", "room": "p"})
	if e := alice.nextOfType("presence_leave"); e["user"] != "bob" {
		t.Fatalf("alice was told %v, want bob's leave once his last connection went", e)
	}
}
