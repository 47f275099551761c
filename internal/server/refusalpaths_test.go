//go:build linux

package server

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestEveryRefusalIsLogged: however a request is refused, the refusal
// counted in Stats.Refused has its info line, with its reason and the
// client's address. The ways are: an upgrade answered on an event loop
// (accept.go); the same upgrade on net/http's goroutine (blocking: what a
// connect hook or TLS makes every upgrade take); a head the loop's parser
// does not take, handed to net/http (handoff.go, head.go); a head too large
// or never finished, on either side; a long poll.
func TestEveryRefusalIsLogged(t *testing.T) {
	v, err := auth.NewHS256(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	withOrigin := strings.Replace(upgradeHead("/ws/a"), "Host: x\r\n", "Host: x\r\nOrigin: https://evil.example.com\r\n", 1)
	big := "GET %s HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 40<<10) + "\r\n\r\n"
	for _, tt := range []struct {
		name     string
		blocking bool
		tweak    func(*Config)
		open     bool   // a client of the same address is connected first
		head     string // what the refused client sends
		status   int    // its answer; 0: cut without one
		reason   string
	}{
		{"origin on a loop", false, allowOnly, false, withOrigin, 403, "origin"},
		{"origin on net/http", true, allowOnly, false, withOrigin, 403, "origin"},
		{"per address on a loop", false, onePerIP, true, upgradeHead("/ws/a"), 429, "per_ip"},
		{"per address on net/http", true, onePerIP, true, upgradeHead("/ws/a"), 429, "per_ip"},
		{"bad room on a loop", false, nil, false, upgradeHead("/ws/a%20b"), 400, "bad_request"},
		{"bad room on net/http", true, nil, false, upgradeHead("/ws/a%20b"), 400, "bad_request"},
		{"head handed off, refused by net/http", false, nil, false,
			strings.Replace(upgradeHead("/ws/a"), "Host: x\r\n", "Host: x\r\nHost: y\r\n", 1), 400, "bad_request"},
		{"head too large on a loop", false, nil, false, strings.Replace(big, "%s", "/ws/a", 1), 431, "header_too_large"},
		{"head too large on net/http", false, nil, false, strings.Replace(big, "%s", "/", 1), 431, "header_too_large"},
		{"head never finished on a loop", false, quickHandshake, false, "GET /ws/a HTTP/1.1\r\nHost: x\r\n", 0, "handshake_timeout"},
		{"head never finished on net/http", false, quickHandshake, false, "GET / HTTP/1.1\r\nHost: x\r\n", 0, "handshake_timeout"},
		{"poll without a token", false, func(c *Config) { c.Auth = v }, false, "GET /rooms/a/messages HTTP/1.1\r\nHost: x\r\n\r\n", 401, "auth"},
		{"poll of a bad room", false, nil, false, "GET /rooms/a%20b/messages HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts, h := startLoggedServer(t, tt.tweak, func(s *Server) { s.blockingAdmission = tt.blocking })
			if tt.open {
				dial(t, ts.url("/ws/a"))
			}
			status, remote := askRaw(t, ts.addr, tt.head)
			if status != tt.status {
				t.Fatalf("answered %d, want %d", status, tt.status)
			}
			checkRefusalLines(t, ts, h, tt.reason, remote)
		})
	}
}

func allowOnly(c *Config)      { c.AllowedOrigins = []string{"https://chat.example.com"} }
func onePerIP(c *Config)       { c.MaxConnsPerIP = 1 }
func quickHandshake(c *Config) { c.HandshakeTimeout = 300 * time.Millisecond }

// askRaw writes head on a connection of its own from 127.0.0.1 and returns
// the status of the answer (0: the connection ended without one) and the
// connection's local address, the remote address the server sees.
func askRaw(t *testing.T, addr, head string) (int, string) {
	t.Helper()
	c := dialFrom(t, "127.0.0.1", addr)
	// A head too large may be refused before it is all written: the write's
	// error is the server's doing, and the answer tells.
	go io.WriteString(c, head)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, c.LocalAddr().String()
	}
	resp.Body.Close()
	return resp.StatusCode, c.LocalAddr().String()
}

// checkRefusalLines checks that the server refused one request, for
// reason, and logged it at info with remote as the client's address.
func checkRefusalLines(t *testing.T, ts *testServer, h *captureHandler, reason, remote string) {
	t.Helper()
	// The answer may reach the client before the refusal is logged (net/http
	// writes it before connSlot.wrote sees it); a refusal is counted, then
	// logged (refusedConn): once its line is there, so is its count.
	testsupport.Eventually(t, 10*time.Second, "the refusal to be logged", func() bool {
		return len(h.records("connection refused")) > 0
	})
	total := uint64(0)
	for _, n := range ts.Stats().Refused {
		total += n
	}
	recs := h.records("connection refused")
	if total != 1 || len(recs) != 1 {
		t.Fatalf("refused %v, logged %v: want one refusal, %s, logged once", ts.Stats().Refused, recs, reason)
	}
	if r := recs[0]; r["level"] != "INFO" || r["reason"] != reason || r["remote"] != remote {
		t.Errorf("logged %v, want reason %s from %s at INFO", r, reason, remote)
	}
}
