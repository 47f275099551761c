//go:build linux

package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	dto "github.com/prometheus/client_model/go"

	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/scrape"
	"github.com/scalechat/scalechat/internal/server"
)

// node is a chat server and its metrics listener, both on loopback.
type node struct {
	srv         *server.Server
	chatAddr    string
	metricsAddr string
}

func startNode(t testing.TB, tweak func(*server.Config), opts Options) *node {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Loops = 2
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Node == "" {
		opts.Node = ln.Addr().String()
	}
	m := New(srv, opts)
	ctx, cancel := context.WithCancel(context.Background())
	chatDone, metricsDone := make(chan error, 1), make(chan error, 1)
	go func() { chatDone <- srv.Serve(ctx, ln) }()
	go func() { metricsDone <- m.Serve(ctx, mln) }()
	t.Cleanup(func() {
		cancel()
		for _, c := range []chan error{chatDone, metricsDone} {
			select {
			case err := <-c:
				if err != nil {
					t.Errorf("serve: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("server did not stop")
			}
		}
	})
	return &node{srv: srv, chatAddr: ln.Addr().String(), metricsAddr: mln.Addr().String()}
}

func (n *node) metricsURL() string { return "http://" + n.metricsAddr + "/metrics" }

// scrape reads the node's /metrics over HTTP.
func (n *node) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(n.metricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	families, err := scrape.ParseText(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	byName := make(map[string]*dto.MetricFamily, len(families))
	for _, f := range families {
		byName[f.GetName()] = f
	}
	return byName
}

// wsClient is a blocking WebSocket client (gobwas/ws, independent of the
// server's codec) that counts the frame bytes it sends and receives.
type wsClient struct {
	t         testing.TB
	conn      net.Conn
	r         *bufio.Reader
	sent, got uint64
}

func dialWS(t testing.TB, addr, room string, header http.Header) (*wsClient, error) {
	d := gws.Dialer{Timeout: 5 * time.Second, Protocols: []string{protocol.Subprotocol}}
	if header != nil {
		d.Header = gws.HandshakeHeaderHTTP(header)
	}
	conn, r, _, err := d.Dial(context.Background(), "ws://"+addr+"/ws/"+room)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = bufio.NewReader(conn)
	}
	t.Cleanup(func() { conn.Close() })
	return &wsClient{t: t, conn: conn, r: r}, nil
}

// join dials room and reads the joined frame.
func join(t testing.TB, addr, room string) *wsClient {
	t.Helper()
	c, err := dialWS(t, addr, room, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", room, err)
	}
	if m := c.next(); m["type"] != "joined" {
		t.Fatalf("want joined, got %v", m)
	}
	return c
}

func (c *wsClient) send(f gws.Frame) {
	c.t.Helper()
	f = gws.MaskFrameInPlace(f)
	if err := gws.WriteFrame(c.conn, f); err != nil {
		c.t.Fatalf("write: %v", err)
	}
	c.sent += uint64(gws.HeaderSize(f.Header)) + uint64(len(f.Payload))
}

func (c *wsClient) sendText(s string) { c.t.Helper(); c.send(gws.NewTextFrame([]byte(s))) }

// sendHeaderOnly sends the header of a text frame of n bytes and nothing
// else.
func (c *wsClient) sendHeaderOnly(n int64) {
	c.t.Helper()
	h := gws.Header{Fin: true, OpCode: gws.OpText, Length: n, Masked: true, Mask: gws.NewMask()}
	if err := gws.WriteHeader(c.conn, h); err != nil {
		c.t.Fatalf("write: %v", err)
	}
	c.sent += uint64(gws.HeaderSize(h))
}

func (c *wsClient) readFrame() (gws.Frame, error) {
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	h, err := gws.ReadHeader(c.r)
	if err != nil {
		return gws.Frame{}, err
	}
	if h.Length > 1<<20 {
		return gws.Frame{}, fmt.Errorf("frame of %d bytes", h.Length)
	}
	f := gws.Frame{Header: h, Payload: make([]byte, h.Length)}
	if _, err := io.ReadFull(c.r, f.Payload); err != nil {
		return gws.Frame{}, err
	}
	c.got += uint64(gws.HeaderSize(h)) + uint64(h.Length)
	return f, nil
}

// next returns the next text message as a map.
func (c *wsClient) next() map[string]any {
	c.t.Helper()
	f, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if f.Header.OpCode != gws.OpText {
		c.t.Fatalf("want a text frame, got opcode %v %q", f.Header.OpCode, f.Payload)
	}
	var m map[string]any
	if err := json.Unmarshal(f.Payload, &m); err != nil {
		c.t.Fatalf("frame %q: %v", f.Payload, err)
	}
	return m
}

// closeHandshake reads the server's close frame (after any text frames),
// answers it, and waits for the server to close the socket. It returns the
// server's close code.
func (c *wsClient) closeHandshake() int {
	c.t.Helper()
	for {
		f, err := c.readFrame()
		if err != nil {
			c.t.Fatalf("want a close frame: %v", err)
		}
		if f.Header.OpCode == gws.OpClose {
			code := int(f.Payload[0])<<8 | int(f.Payload[1])
			// After 1002 or 1009 the server closes TCP without waiting for
			// our answer (RFC 6455 7.1.7): the write may find it gone.
			reply := gws.MaskFrameInPlace(gws.NewCloseFrame(gws.NewCloseFrameBody(gws.StatusCode(code), "")))
			if err := gws.WriteFrame(c.conn, reply); err == nil && code != 1002 && code != 1009 {
				c.sent += uint64(gws.HeaderSize(reply.Header)) + uint64(len(reply.Payload)) // the server reads it
			}
			c.waitEOF()
			return code
		}
	}
}

// waitEOF reads until the server closes the socket.
func (c *wsClient) waitEOF() {
	c.t.Helper()
	for {
		if _, err := c.readFrame(); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return
			}
			c.t.Fatalf("want EOF, got %v", err)
		}
	}
}

// value returns the value of the series of family name whose labels are
// labels ("k=v,k2=v2", or "" for a family without labels); NaN when absent.
func value(families map[string]*dto.MetricFamily, name, labels string) float64 {
	f := families[name]
	if f == nil {
		return math.NaN()
	}
	for _, m := range f.GetMetric() {
		var ls []string
		for _, lp := range m.GetLabel() {
			ls = append(ls, lp.GetName()+"="+lp.GetValue())
		}
		if strings.Join(ls, ",") != labels {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return math.NaN()
}
