//go:build linux

package server

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/auth"
)

// captureHandler keeps every log record, for tests that check what the
// server logged.
type captureHandler struct {
	mu   sync.Mutex
	recs []map[string]string // message under "msg", then the attributes
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *captureHandler) WithGroup(string) slog.Handler            { return h }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, m)
	h.mu.Unlock()
	return nil
}

// records returns the records whose message is msg.
func (h *captureHandler) records(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, m := range h.recs {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// startLoggedServer is startServerWith whose log goes to the handler it
// returns.
func startLoggedServer(t *testing.T, tweak func(*Config), before func(*Server)) (*testServer, *captureHandler) {
	t.Helper()
	h := &captureHandler{}
	ts := startServerWith(t, func(c *Config) {
		c.Logger = slog.New(h)
		if tweak != nil {
			tweak(c)
		}
	}, before)
	return ts, h
}

// upgradeFrom sends one upgrade request for path from a connection of its
// own and returns the status and the connection's local address (the
// remote address the server sees). The connection stays open until the
// test ends.
func upgradeFrom(t *testing.T, addr, path string, header http.Header) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", path, addr)
	for k, vs := range header {
		for _, v := range vs {
			req += k + ": " + v + "\r\n"
		}
	}
	if _, err := c.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, c.LocalAddr().String()
}

// TestRefusalsAreLogged: every refused upgrade is logged at info with its
// reason, the client's address and what the client was told.
func TestRefusalsAreLogged(t *testing.T) {
	v, err := auth.NewHS256(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := auth.MintHS256([]byte("another secret entirely, 32 byte"), "alice", nil, time.Hour)
	onlyB := mint(t, "bob", []string{"b"}, time.Hour)
	for _, tt := range []struct {
		name   string
		tweak  func(*Config)
		open   int // upgrades that succeed first
		path   string
		header http.Header
		reason string
		status int
		msg    string
	}{
		{"origin", func(c *Config) { c.AllowedOrigins = []string{"https://chat.example.com"} }, 0, "/ws/a",
			http.Header{"Origin": {"https://evil.example.com"}}, "origin", 403, "origin not allowed"},
		{"bad room", nil, 0, "/ws/a/b", nil, "bad_request", 400, roomNameRule},
		{"no room", nil, 0, "/ws/", nil, "bad_request", 400, roomNameRule},
		{"bad since", nil, 0, "/ws/a?since=x", nil, "bad_request", 400, "since must be a sequence number"},
		{"full", func(c *Config) { c.MaxConnections = 1 }, 1, "/ws/a", nil, "max_connections", 503, "server full"},
		{"per address", func(c *Config) { c.MaxConnsPerIP = 1 }, 1, "/ws/a", nil, "per_ip", 429, "too many connections from your address"},
		{"bad token", func(c *Config) { c.Auth = v }, 0, "/ws/a?token=" + forged, nil, "auth", 401, "invalid token"},
		{"room not in the token", func(c *Config) { c.Auth = v }, 0, "/ws/a?token=" + onlyB, nil, "forbidden", 403, "does not allow this room"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts, h := startLoggedServer(t, tt.tweak, nil)
			for range tt.open {
				dial(t, ts.url("/ws/a"))
			}
			status, local := upgradeFrom(t, ts.addr, tt.path, tt.header)
			if status != tt.status {
				t.Fatalf("status %d, want %d", status, tt.status)
			}
			recs := h.records("connection refused")
			if len(recs) != 1 {
				t.Fatalf("%d refusal lines, want 1: %v", len(recs), recs)
			}
			r := recs[0]
			if r["level"] != "INFO" || r["reason"] != tt.reason || r["remote"] != local || r["status"] != fmt.Sprint(tt.status) ||
				!strings.Contains(r["answer"], tt.msg) {
				t.Errorf("logged %v, want reason %s, remote %s, status %d, answer with %q", r, tt.reason, local, tt.status, tt.msg)
			}
		})
	}
}

// TestRefusalFloodIsBounded: a flood of refusals costs a few lines a
// second, and the lines (each refusal logged, plus the suppressed counts)
// still account for every refusal.
func TestRefusalFloodIsBounded(t *testing.T) {
	ts, h := startLoggedServer(t, nil, nil)
	const n = 300
	start := time.Now()
	for range n {
		if status, _ := upgradeFrom(t, ts.addr, "/ws/a?since=x", nil); status != http.StatusBadRequest {
			t.Fatalf("status %d", status)
		}
	}
	took := time.Since(start)
	lines := h.records("connection refused")
	if max := refusalLinesPerSecond * (int(took/time.Second) + 1); len(lines) > max || len(lines) == 0 {
		t.Errorf("%d refusals in %s logged %d lines, want 1 to %d", n, took, len(lines), max)
	}
	ts.refusals.flush(time.Now().Add(time.Second))
	counted := len(lines)
	for _, r := range append(lines, h.records("connection refusals not logged one by one")...) {
		var k int
		if s := r["suppressed"]; s != "" {
			fmt.Sscan(s, &k)
		}
		counted += k
	}
	if counted != n {
		t.Errorf("lines and suppressed counts account for %d refusals, want %d", counted, n)
	}
}

func TestRefusalLogWindow(t *testing.T) {
	h := &captureHandler{}
	l := newRefusalLog(slog.New(h), 2)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 10 {
		l.refused(t0.Add(time.Duration(i)*time.Millisecond), RefuseOrigin, 403, "127.0.0.1:1", "/ws/a", "origin not allowed")
	}
	l.refused(t0, RefusePerIP, 429, "127.0.0.1:2", "/ws/a", "too many") // another reason has its own lines
	l.flush(t0.Add(500 * time.Millisecond))                             // the second is not over: nothing yet
	if got := len(h.records("connection refused")); got != 3 {
		t.Fatalf("%d lines in the first second, want 2 origin + 1 per_ip", got)
	}
	if got := len(h.records("connection refusals not logged one by one")); got != 0 {
		t.Fatalf("flush within the second logged %d lines", got)
	}
	l.refused(t0.Add(time.Second), RefuseOrigin, 403, "127.0.0.1:1", "/ws/a", "origin not allowed")
	recs := h.records("connection refused")
	if last := recs[len(recs)-1]; len(recs) != 4 || last["suppressed"] != "8" {
		t.Fatalf("next second's line %v, want suppressed=8", last)
	}
	for range 5 {
		l.refused(t0.Add(1500*time.Millisecond), RefuseOrigin, 403, "127.0.0.1:1", "/ws/a", "origin not allowed")
	}
	l.flush(t0.Add(2 * time.Second))
	held := h.records("connection refusals not logged one by one")
	if len(held) != 1 || held[0]["suppressed"] != "4" || held[0]["reason"] != "origin" {
		t.Fatalf("flush logged %v, want one line: origin, suppressed=4", held)
	}
	l.flush(t0.Add(5 * time.Second))
	if got := len(h.records("connection refusals not logged one by one")); got != 1 {
		t.Errorf("a second flush logged again: %d lines", got)
	}
}
