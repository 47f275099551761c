//go:build linux

package server

import (
	"bufio"
	"bytes"
	stdflate "compress/flate"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/httphead"
	gws "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsflate"
	"github.com/scalechat/scalechat/internal/protocol"
)

// deflateClient is a client built on gobwas/ws and its wsflate package (an
// implementation of RFC 7692 independent of the server's), which offers
// permessage-deflate and reads what the server answered.
type deflateClient struct {
	*client
	extensions string // the server's Sec-WebSocket-Extensions answer
}

func dialDeflate(t *testing.T, url string) *deflateClient {
	t.Helper()
	dc := &deflateClient{}
	d := gws.Dialer{
		Timeout:    5 * time.Second,
		Extensions: []httphead.Option{wsflate.DefaultParameters.Option()},
		Protocols:  []string{protocol.Subprotocol},
	}
	conn, r, hs, err := d.Dial(context.Background(), url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	if r == nil {
		r = bufio.NewReader(conn)
	}
	for _, e := range hs.Extensions {
		dc.extensions += e.String() + ", "
	}
	t.Cleanup(func() { conn.Close() })
	dc.client = &client{t: t, conn: conn, r: r}
	return dc
}

// sendCompressed writes text as one compressed frame.
func (c *deflateClient) sendCompressed(text string) {
	c.t.Helper()
	f, err := wsflate.CompressFrame(gws.NewTextFrame([]byte(text)))
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(f)
}

// nextMessage returns the next text message, inflated when it came
// compressed, and whether it did.
func (c *deflateClient) nextMessage() (map[string]any, bool) {
	c.t.Helper()
	for {
		f, err := c.readFrame(5 * time.Second)
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if f.Header.OpCode != gws.OpText {
			continue
		}
		compressed := f.Header.Rsv&0x4 != 0
		if compressed {
			if f, err = wsflate.DecompressFrame(f); err != nil {
				c.t.Fatalf("inflate: %v", err)
			}
		}
		var m map[string]any
		if err := json.Unmarshal(f.Payload, &m); err != nil {
			c.t.Fatalf("%q: %v", f.Payload, err)
		}
		if m["type"] == nil {
			return m, compressed
		}
	}
}

func TestCompressionNegotiatedAndShared(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Compression = true })
	a := dialDeflate(t, ts.url("/ws/z"))
	if !strings.Contains(a.extensions, "permessage-deflate") || !strings.Contains(a.extensions, "server_no_context_takeover") ||
		!strings.Contains(a.extensions, "client_no_context_takeover") {
		t.Fatalf("the server answered %q", a.extensions)
	}
	b := dialDeflate(t, ts.url("/ws/z"))
	plain := dial(t, ts.url("/ws/z"))
	for _, c := range []*client{a.client, b.client, plain} {
		c.nextOfType("joined")
	}
	text := strings.Repeat("compressible chat text ", 20)
	a.sendCompressed(`{"sender":"a","text":"` + text + `"}`)
	for name, c := range map[string]*deflateClient{"sender": a, "member": b} {
		m, compressed := c.nextMessage()
		if !compressed || m["text"] != text || m["seq"] != 1.0 {
			t.Errorf("%s got compressed=%v %v", name, compressed, m)
		}
	}
	if m := plain.next(); m["text"] != text {
		t.Errorf("the member without compression got %v", m)
	}
	// The same shared frame for a member who joins later, from the history.
	late := dialDeflate(t, ts.url("/ws/z"))
	if m, compressed := late.nextMessage(); !compressed || m["seq"] != 1.0 {
		t.Errorf("history replay: compressed=%v %v", compressed, m)
	}
}

func TestCompressionOffWithoutTheFlag(t *testing.T) {
	ts := startServer(t, nil)
	c := dialDeflate(t, ts.url("/ws/z"))
	if c.extensions != "" {
		t.Errorf("without --compression the server answered %q", c.extensions)
	}
	// RSV1 without negotiation is a protocol error.
	f, _ := wsflate.CompressFrame(gws.NewTextFrame([]byte(`{"text":"x"}`)))
	c.nextOfType("joined")
	c.sendRaw(f)
	if code := c.expectClose(); code != 1002 {
		t.Errorf("close %d, want 1002", code)
	}
}

func TestCompressionRefusesBadInput(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Compression = true; c.MaxMessageSize = 4096 })
	bomb := func() gws.Frame {
		var buf bytes.Buffer
		w, _ := stdflate.NewWriter(&buf, stdflate.BestCompression)
		w.Write(make([]byte, 1<<20)) // 1 MiB of zeros, about 1 KiB compressed
		w.Flush()
		f := gws.NewTextFrame(bytes.TrimSuffix(buf.Bytes(), []byte{0, 0, 0xff, 0xff}))
		f.Header.Rsv = 0x4
		return f
	}
	for _, tt := range []struct {
		name  string
		frame gws.Frame
		code  int
	}{
		{"a message that inflates past the limit", bomb(), 1009},
		{"not deflate data", gws.Frame{Header: gws.Header{Fin: true, Rsv: 0x4, OpCode: gws.OpText, Length: 3}, Payload: []byte{0xff, 0xfe, 0xfd}}, 1007},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialDeflate(t, ts.url("/ws/z"))
			c.nextOfType("joined")
			c.sendRaw(tt.frame)
			if code := c.expectClose(); code != tt.code {
				t.Errorf("close %d, want %d", code, tt.code)
			}
		})
	}
	invalid, _ := wsflate.CompressFrame(gws.NewTextFrame([]byte("\xff\xfe not UTF-8")))
	c := dialDeflate(t, ts.url("/ws/z"))
	c.nextOfType("joined")
	c.sendRaw(invalid)
	if code := c.expectClose(); code != 1007 {
		t.Errorf("invalid UTF-8 inside a compressed message: close %d, want 1007", code)
	}
}
