//go:build linux

package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/scalechat/scalechat/internal/server"
)

const secret = "the example's secret, 16+ bytes"

// TestWithScalechat runs the example backend beside a real scalechat
// server and checks what its README promises: mallory refused, staff rooms
// for alice only, spam refused, darn masked.
func TestWithScalechat(t *testing.T) {
	b := &Backend{Secret: secret, Banned: []string{"mallory"}, Admins: []string{"alice"}, Blocked: []string{"spam"},
		Masked: []string{"darn"}, Log: slog.New(slog.DiscardHandler)}
	hb := httptest.NewServer(b.Handler())
	defer hb.Close()
	cfg := server.DefaultConfig()
	cfg.Loops = 1
	cfg.ShutdownTimeout = time.Second // the test's clients do not answer close frames
	cfg.Hooks.Secret = secret
	cfg.Hooks.ConnectURL, cfg.Hooks.JoinURL, cfg.Hooks.PublishURL = hb.URL+"/connect", hb.URL+"/join", hb.URL+"/publish"
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	base := "ws://" + ln.Addr().String()

	if err := refused(t, base+"/ws/lobby?name=mallory"); !strings.Contains(err.Error(), "4403") || !strings.Contains(err.Error(), "banned") {
		t.Errorf("mallory: %v, want her refused with 4403 and the reason", err)
	}
	if err := refused(t, base+"/ws/staff?name=bob"); !strings.Contains(err.Error(), "staff rooms are for staff") {
		t.Errorf("bob in staff: %v", err)
	}
	alice, err := dial(t, base+"/ws/staff?name=alice")
	if err != nil {
		t.Fatal(err)
	}
	next(t, alice) // joined
	send(t, alice, `{"text":"buy spam","message_id":1}`)
	if m := next(t, alice); m["code"] != "refused" || !strings.Contains(m["message"].(string), "spam") {
		t.Errorf("spam: %v", m)
	}
	send(t, alice, `{"text":"oh Darn it","message_id":2}`)
	if m := next(t, alice); m["text"] != "oh **** it" || m["sender"] != "alice" || m["message_id"] != float64(2) {
		t.Errorf("masked: %v", m)
	}
	guest, err := dial(t, base+"/ws/lobby")
	if err != nil {
		t.Fatal(err)
	}
	next(t, guest)
	send(t, guest, `{"text":"hello"}`)
	if m := next(t, guest); m["text"] != "hello" || !strings.HasPrefix(m["sender"].(string), "guest-") {
		t.Errorf("guest: %v", m)
	}
}

// dial connects as the browser page does (subprotocol scalechat.v1).
func dial(t *testing.T, url string) (io.ReadWriter, error) {
	conn, br, _, err := gws.Dialer{Timeout: 5 * time.Second, Protocols: []string{"scalechat.v1"}}.Dial(context.Background(), url)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { conn.Close() })
	var rw io.ReadWriter = conn
	if br != nil {
		rw = struct {
			io.Reader
			io.Writer
		}{br, conn}
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	return rw, nil
}

// refused dials a connection the hooks refuse: the refusal comes after the
// upgrade as a close frame, returned as the error (code and reason).
func refused(t *testing.T, url string) error {
	t.Helper()
	rw, err := dial(t, url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := wsutil.ReadServerText(rw)
	if err == nil {
		t.Fatalf("%s: got %s, want a close", url, b)
	}
	return err
}

func send(t *testing.T, rw io.ReadWriter, s string) {
	t.Helper()
	if err := wsutil.WriteClientText(rw, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

func next(t *testing.T, rw io.ReadWriter) map[string]any {
	t.Helper()
	b, err := wsutil.ReadServerText(rw)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
