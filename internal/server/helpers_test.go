//go:build linux

package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/scalechat/scalechat/internal/protocol"
)

// testServer is a real server on a loopback port.
type testServer struct {
	*Server
	addr    string
	cancel  context.CancelFunc
	stopped chan struct{} // closed when Serve has returned
	err     error         // what Serve returned
}

func startServer(t testing.TB, tweak func(*Config)) *testServer {
	t.Helper()
	return startServerWith(t, tweak, nil)
}

// startServerWith is startServer with a change to the server made before
// it serves (before may be nil).
func startServerWith(t testing.TB, tweak func(*Config), before func(*Server)) *testServer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Loops = 2
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{Server: srv, addr: ln.Addr().String(), cancel: cancel, stopped: make(chan struct{})}
	go func() {
		ts.err = srv.Serve(ctx, ln)
		close(ts.stopped)
	}()
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

// stop shuts the server down and waits for Serve to return.
func (ts *testServer) stop(t testing.TB) {
	t.Helper()
	ts.cancel()
	if !ts.wait(30 * time.Second) {
		t.Fatal("server did not stop")
	}
	if ts.err != nil {
		t.Errorf("Serve: %v", ts.err)
	}
}

// wait reports whether Serve returned within d.
func (ts *testServer) wait(d time.Duration) bool {
	select {
	case <-ts.stopped:
		return true
	case <-time.After(d):
		return false
	}
}

func (ts *testServer) url(path string) string { return "ws://" + ts.addr + path }

// client is a blocking WebSocket client built on gobwas/ws, an
// implementation independent of the server's.
type client struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

func dial(t testing.TB, url string) *client {
	t.Helper()
	c, err := tryDial(t, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return c
}

func tryDial(t testing.TB, url string, header http.Header) (*client, error) {
	d := gws.Dialer{Timeout: 5 * time.Second, Protocols: []string{protocol.Subprotocol}}
	if header != nil {
		d.Header = gws.HandshakeHeaderHTTP(header)
	}
	conn, r, _, err := d.Dial(context.Background(), url)
	if err != nil {
		return nil, err
	}
	c := &client{t: t, conn: conn, r: r}
	t.Cleanup(func() { conn.Close() })
	return c, nil
}

func (c *client) reader() *bufio.Reader {
	if c.r == nil {
		c.r = bufio.NewReader(c.conn)
	}
	return c.r
}

func (c *client) sendRaw(f gws.Frame) {
	c.t.Helper()
	if err := gws.WriteFrame(c.conn, gws.MaskFrameInPlace(f)); err != nil {
		c.t.Fatalf("write frame: %v", err)
	}
}

func (c *client) sendText(s string) { c.t.Helper(); c.sendRaw(gws.NewTextFrame([]byte(s))) }

func (c *client) sendJSON(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(gws.NewTextFrame(b))
}

// readFrame returns the next frame from the server, answering nothing.
func (c *client) readFrame(timeout time.Duration) (gws.Frame, error) {
	c.conn.SetReadDeadline(time.Now().Add(timeout))
	defer c.conn.SetReadDeadline(time.Time{})
	//lint:ignore SA1019 the peer is the server under test, whose frames are bounded
	f, err := gws.ReadFrame(c.reader())
	if err != nil {
		return f, err
	}
	if f.Header.Masked {
		return f, errors.New("server frame is masked")
	}
	return f, nil
}

// next returns the next text message as a map, failing on anything else.
func (c *client) next() map[string]any {
	c.t.Helper()
	for {
		f, err := c.readFrame(5 * time.Second)
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		switch f.Header.OpCode {
		case gws.OpPing:
			continue
		case gws.OpText:
			var m map[string]any
			if err := json.Unmarshal(f.Payload, &m); err != nil {
				c.t.Fatalf("frame %q is not JSON: %v", f.Payload, err)
			}
			return m
		case gws.OpClose:
			code, reason := closeOf(f)
			c.t.Fatalf("unexpected close %d %q", code, reason)
		default:
			c.t.Fatalf("unexpected opcode %v", f.Header.OpCode)
		}
	}
}

// nextOfType skips chat messages and returns the next frame whose type is typ.
func (c *client) nextOfType(typ string) map[string]any {
	c.t.Helper()
	for {
		m := c.next()
		if m["type"] == typ {
			return m
		}
		if m["type"] != nil {
			c.t.Fatalf("want a %s frame, got %v", typ, m)
		}
	}
}

// joined reads the joined frame, the history_gap frame when gap is true,
// and the history that follows.
func (c *client) joined(gap ...bool) (map[string]any, []map[string]any) {
	c.t.Helper()
	j := c.next()
	if j["type"] != "joined" {
		c.t.Fatalf("want joined, got %v", j)
	}
	if len(gap) > 0 && gap[0] {
		g := c.next()
		if g["type"] != "history_gap" {
			c.t.Fatalf("want history_gap, got %v", g)
		}
		j["gap"] = g
	}
	var hist []map[string]any
	for range int(j["history"].(float64)) {
		m := c.next()
		if m["type"] != nil {
			c.t.Fatalf("want a replayed message, got %v", m)
		}
		hist = append(hist, m)
	}
	return j, hist
}

// expectClose reads until a close frame and returns its code. Text frames
// before it are skipped.
func (c *client) expectClose() int {
	c.t.Helper()
	_, code := c.textsUntilClose()
	return code
}

// textsUntilClose reads until the close frame and returns the texts of the
// chat messages before it and the close code.
func (c *client) textsUntilClose() (texts []string, code int) {
	c.t.Helper()
	for {
		f, err := c.readFrame(10 * time.Second)
		if err != nil {
			c.t.Fatalf("want a close frame, got error %v", err)
		}
		if f.Header.OpCode == gws.OpClose {
			code, _ := closeOf(f)
			return texts, code
		}
		var m map[string]any
		if json.Unmarshal(f.Payload, &m) == nil && m["type"] == nil { // a chat message
			texts = append(texts, fmt.Sprint(m["text"]))
		}
	}
}

// finishClose answers the server's close frame and waits for the server to
// close the TCP connection.
// After a protocol error the server may already have closed TCP: then
// writing fails or the read sees a reset, which is fine too.
func (c *client) finishClose() {
	c.t.Helper()
	_ = gws.WriteFrame(c.conn, gws.MaskFrameInPlace(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, ""))))
	for {
		if _, err := c.readFrame(10 * time.Second); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return
			}
			c.t.Fatalf("want EOF after the close handshake, got %v", err)
		}
	}
}

func closeOf(f gws.Frame) (int, string) {
	if len(f.Payload) < 2 {
		return 1005, ""
	}
	return int(f.Payload[0])<<8 | int(f.Payload[1]), string(f.Payload[2:])
}

// connect dials a room and consumes its joined frame and history.
func connect(t testing.TB, ts *testServer, room string) *client {
	t.Helper()
	c := dial(t, ts.url("/ws/"+room))
	c.joined()
	return c
}

func msg(text string, extra ...any) map[string]any {
	m := map[string]any{"text": text}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func httpGet(t testing.TB, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No keep-alive: an idle HTTP connection counts against the caps as
	// long as it is open, and tests count connections.
	req.Close = true
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
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
