//go:build linux

package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"
	gws "github.com/gobwas/ws"
	"github.com/scalechat/scalechat/internal/protocol"
)

// dialLegacy connects as a client that knows only the five chat fields: no
// subprotocol. It reports the subprotocol the server answered with.
func dialLegacy(t *testing.T, url string, protocols ...string) (*client, string) {
	t.Helper()
	d := gws.Dialer{Timeout: 5 * time.Second, Protocols: protocols}
	conn, r, hs, err := d.Dial(context.Background(), url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, conn: conn, r: r}, hs.Protocol
}

// A five-field client gets chat frames only: no joined frame before the
// history or its own echo, refusals as close codes.
func TestLegacyClientGetsChatFramesOnly(t *testing.T) {
	ts := startServer(t, nil)
	// History first, written by a client of the subprotocol.
	w := connect(t, ts, "old")
	w.sendJSON(msg("before"))
	w.next()

	c, proto := dialLegacy(t, ts.url("/ws/old"))
	if proto != "" {
		t.Errorf("subprotocol %q answered to a client that offered none", proto)
	}
	if m := c.next(); m["type"] != nil || m["text"] != "before" || m["seq"] != 1.0 {
		t.Fatalf("first frame = %v, want the history's chat message", m)
	}
	c.sendJSON(map[string]any{"message_id": 7, "sender": "alice", "sent_at": "2026-11-21T10:00:00.123Z", "text": "hello"})
	m := c.next()
	if m["type"] != nil || m["room"] != "old" || m["seq"] != 2.0 || m["server_at"] == nil || m["message_id"] != 7.0 || m["sender"] != "alice" {
		t.Fatalf("echo = %v, want the chat message with room, seq and server_at", m)
	}
	// Control requests work but answer nothing; the next frame is chat.
	c.sendJSON(map[string]any{"type": "join", "room": "other"})
	c.sendJSON(map[string]any{"type": "presence", "room": "old"})
	c.sendJSON(msg("again"))
	if m := c.next(); m["type"] != nil || m["text"] != "again" {
		t.Fatalf("after join and presence: %v, want the chat message", m)
	}
	if m := w.next(); m["text"] != "hello" {
		t.Fatalf("the subprotocol client got %v", m)
	}
}

func TestLegacyRefusalsAreCloseCodes(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RateLimit, c.RateBurst, c.RateAbuse = 1, 1, 5 })
	tests := []struct {
		name  string
		frame string
		code  int
	}{
		{"not JSON", `hello`, 1007},
		{"no text", `{"message_id":1}`, 1007},
		{"unknown type", `{"type":"shout","text":"x"}`, 1007},
		{"room not joined", `{"room":"elsewhere","text":"x"}`, 1008},
		{"already joined", `{"type":"join","room":"r"}`, 1008},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := dialLegacy(t, ts.url("/ws/r"))
			c.sendText(tt.frame)
			if code := c.expectClose(); code != tt.code {
				t.Errorf("close code %d, want %d", code, tt.code)
			}
		})
	}
	t.Run("rate limit", func(t *testing.T) {
		c, _ := dialLegacy(t, ts.url("/ws/r"))
		c.sendJSON(msg("one"))
		c.sendJSON(msg("two"))
		if code := c.expectClose(); code != 1008 {
			t.Errorf("close code %d, want 1008", code)
		}
	})
}

func TestSubprotocolIsNegotiated(t *testing.T) {
	ts := startServer(t, nil)
	c, proto := dialLegacy(t, ts.url("/ws/n"), "other.v9", protocol.Subprotocol)
	if proto != protocol.Subprotocol {
		t.Fatalf("subprotocol %q, want %q", proto, protocol.Subprotocol)
	}
	c.joined()
	c.sendText(`{"room":"elsewhere","text":"x"}`)
	if e := c.next(); e["type"] != "error" || e["code"] != protocol.CodeNotJoined {
		t.Fatalf("got %v, want a not_joined error frame", e)
	}
	if _, proto := dialLegacy(t, ts.url("/ws/n"), "Scalechat.V1"); proto != "" {
		t.Errorf("subprotocol tokens compare exactly; got %q", proto)
	}
}

// A five-field client that sends its JSON in binary frames (Tsung's
// default, and the original server reads them) is read as if they were
// text; it and everyone else get the chat message back as text. A client
// of the subprotocol is still held to text frames.
func TestLegacyBinaryFramesAreReadAsText(t *testing.T) {
	ts := startServer(t, nil)
	w := connect(t, ts, "bin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, ts.url("/ws/bin"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageBinary, []byte(`{"message_id":3,"sender":"tsung","text":"héllo","room":"bin"}`)); err != nil {
		t.Fatal(err)
	}
	typ, data, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); typ != websocket.MessageText || err != nil || m["text"] != "héllo" || m["seq"] != 1.0 || m["message_id"] != 3.0 {
		t.Fatalf("echo: %v %s (%v), want the chat message as text", typ, data, err)
	}
	if m := w.next(); m["text"] != "héllo" || m["sender"] != "tsung" {
		t.Fatalf("the other member got %v", m)
	}

	tests := []struct {
		name    string
		control bool
		payload []byte
		code    websocket.StatusCode
	}{
		{"five-field, not UTF-8", false, []byte("{\"text\":\"\xff\"}"), websocket.StatusInvalidFramePayloadData},
		{"five-field, not JSON", false, []byte("hello"), websocket.StatusInvalidFramePayloadData},
		{"subprotocol", true, []byte(`{"text":"x"}`), websocket.StatusUnsupportedData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts *websocket.DialOptions
			if tt.control {
				opts = &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}}
			}
			c, _, err := websocket.Dial(ctx, ts.url("/ws/bin"), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			if err := c.Write(ctx, websocket.MessageBinary, tt.payload); err != nil {
				t.Fatal(err)
			}
			for {
				if _, _, err = c.Read(ctx); err != nil {
					break // the joined frame and the history come first
				}
			}
			if got := websocket.CloseStatus(err); got != tt.code {
				t.Fatalf("closed with %d (%v), want %d", got, err, tt.code)
			}
		})
	}
}
