//go:build linux

package server

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"

	"github.com/scalechat/scalechat/internal/ws"
)

// RFC 6455 edge cases, each driven by a raw-socket client against /echo,
// which is served by the same connection layer as the chat.

func echoServer(t *testing.T) *testServer {
	return startServer(t, func(c *Config) { c.EchoEndpoint = true; c.MaxMessageSize = 1024; c.EchoMaxMessage = 1024 })
}

func TestEchoEchoesTextAndBinary(t *testing.T) {
	ts := echoServer(t)
	c := dial(t, ts.url("/echo"))
	for _, f := range []gws.Frame{gws.NewTextFrame([]byte("héllo")), gws.NewBinaryFrame([]byte{0, 1, 2, 255}), gws.NewTextFrame(nil)} {
		payload := append([]byte(nil), f.Payload...)
		c.sendRaw(f)
		got, err := c.readFrame(5e9)
		if err != nil || got.Header.OpCode != f.Header.OpCode || !bytes.Equal(got.Payload, payload) || !got.Header.Fin {
			t.Errorf("sent %v %q, got %v %q %v", f.Header.OpCode, payload, got.Header.OpCode, got.Payload, err)
		}
	}
	if code, _ := httpGet(t, "http://"+startServer(t, nil).addr+"/echo", nil); code != 404 {
		t.Errorf("/echo without --echo-endpoint: %d", code)
	}
}

func TestRFC6455EdgeCases(t *testing.T) {
	ts := echoServer(t)
	type step struct {
		frame gws.Frame
		raw   []byte // written as is instead of frame (unmasked, malformed)
	}
	f := func(op gws.OpCode, fin bool, p string) step { return step{frame: gws.NewFrame(op, fin, []byte(p))} }
	rsv := func(bits byte) step {
		fr := gws.NewTextFrame([]byte("x"))
		fr.Header.Rsv = bits
		return step{frame: fr}
	}
	tests := []struct {
		name  string
		steps []step
		// expected answers in order: opcode and payload; a close is checked by code
		want []gws.Frame
		code int // close code expected at the end; 0: connection stays open
	}{
		{"fragmented text", []step{f(gws.OpText, false, "fra"), f(gws.OpContinuation, false, "gme"), f(gws.OpContinuation, true, "nted")},
			[]gws.Frame{gws.NewTextFrame([]byte("fragmented"))}, 0},
		{"fragmented binary", []step{f(gws.OpBinary, false, "\x00"), f(gws.OpContinuation, true, "\x01")},
			[]gws.Frame{gws.NewBinaryFrame([]byte{0, 1})}, 0},
		{"ping between fragments", []step{f(gws.OpText, false, "a"), f(gws.OpPing, true, "p"), f(gws.OpContinuation, true, "b")},
			[]gws.Frame{gws.NewPongFrame([]byte("p")), gws.NewTextFrame([]byte("ab"))}, 0},
		{"empty ping", []step{f(gws.OpPing, true, "")}, []gws.Frame{gws.NewPongFrame(nil)}, 0},
		{"ping of 125 bytes", []step{f(gws.OpPing, true, strings.Repeat("p", 125))}, []gws.Frame{gws.NewPongFrame([]byte(strings.Repeat("p", 125)))}, 0},
		{"unsolicited pong is ignored", []step{f(gws.OpPong, true, "x"), f(gws.OpText, true, "y")}, []gws.Frame{gws.NewTextFrame([]byte("y"))}, 0},
		{"ping of 126 bytes", []step{f(gws.OpPing, true, strings.Repeat("p", 126))}, nil, 1002},
		{"fragmented ping", []step{f(gws.OpPing, false, "p")}, nil, 1002},
		{"close 1000 echoed", []step{{frame: gws.NewCloseFrame(gws.NewCloseFrameBody(1000, "bye"))}}, nil, 1000},
		{"close 3000 answered", []step{{frame: gws.NewCloseFrame(gws.NewCloseFrameBody(3000, ""))}}, nil, 3000},
		{"empty close answered 1000", []step{{frame: gws.NewCloseFrame(nil)}}, nil, 1000},
		{"close with one byte", []step{{frame: gws.NewCloseFrame([]byte{3})}}, nil, 1002},
		{"close 1005 on the wire", []step{{frame: gws.NewCloseFrame(gws.NewCloseFrameBody(1005, ""))}}, nil, 1002},
		{"close 999", []step{{frame: gws.NewCloseFrame(gws.NewCloseFrameBody(999, ""))}}, nil, 1002},
		{"close 5000", []step{{frame: gws.NewCloseFrame(gws.NewCloseFrameBody(5000, ""))}}, nil, 1002},
		{"close reason not UTF-8", []step{{frame: gws.NewCloseFrame(append([]byte{3, 232}, 0xff))}}, nil, 1002},
		{"unmasked frame", []step{{raw: []byte{0x81, 0x01, 'x'}}}, nil, 1002},
		{"opcode 3", []step{f(3, true, "")}, nil, 1002},
		{"opcode 7", []step{f(7, true, "")}, nil, 1002},
		{"opcode 0xB", []step{f(0xB, true, "")}, nil, 1002},
		{"opcode 0xF", []step{f(0xF, true, "")}, nil, 1002},
		{"RSV1", []step{rsv(4)}, nil, 1002},
		{"RSV2", []step{rsv(2)}, nil, 1002},
		{"RSV3", []step{rsv(1)}, nil, 1002},
		{"continuation first", []step{f(gws.OpContinuation, true, "x")}, nil, 1002},
		{"text inside a fragmented text", []step{f(gws.OpText, false, "a"), f(gws.OpText, true, "b")}, nil, 1002},
		{"invalid UTF-8 across fragments", []step{f(gws.OpText, false, "\xc3"), f(gws.OpContinuation, true, "\x28")}, nil, 1007},
		// Fail fast (Autobahn 6.4.*): the fragment where the text becomes
		// invalid is refused, without waiting for the end of the message.
		{"invalid UTF-8 in a first fragment", []step{f(gws.OpText, false, "κόσμε\xf4\x90\x80\x80")}, nil, 1007},
		{"invalid UTF-8 in a middle fragment", []step{f(gws.OpText, false, "κ\xce"), f(gws.OpContinuation, false, "\xba\xed\xa0\x80")}, nil, 1007},
		{"a code point cut between fragments waits", []step{f(gws.OpText, false, "\xf0\x9f"), f(gws.OpContinuation, false, "\x98"), f(gws.OpContinuation, true, "\x80")},
			[]gws.Frame{gws.NewTextFrame([]byte("😀"))}, 0},
		{"UTF-8 split across fragments is fine", []step{f(gws.OpText, false, "\xc3"), f(gws.OpContinuation, true, "\xa9")},
			[]gws.Frame{gws.NewTextFrame([]byte("é"))}, 0},
		{"64-bit length with its top bit set", []step{{raw: []byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}}}, nil, 1002},
		// RFC 6455 section 5.2: the minimal number of bytes MUST encode the length.
		{"16-bit length for 5 bytes", []step{{raw: []byte{0x81, 0xfe, 0, 5, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'}}}, nil, 1002},
		{"64-bit length for 200 bytes", []step{{raw: append([]byte{0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 200, 0, 0, 0, 0}, make([]byte, 200)...)}}, nil, 1002},
		{"message over the size limit", []step{f(gws.OpBinary, true, strings.Repeat("x", 1025))}, nil, 1009},
		{"fragments over the size limit", []step{f(gws.OpBinary, false, strings.Repeat("x", 600)), f(gws.OpContinuation, true, strings.Repeat("x", 600))}, nil, 1009},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, ts.url("/echo"))
			for _, s := range tt.steps {
				if s.raw != nil {
					if _, err := c.conn.Write(s.raw); err != nil {
						t.Fatal(err)
					}
					continue
				}
				c.sendRaw(s.frame)
			}
			for _, w := range tt.want {
				got, err := c.readFrame(5e9)
				if err != nil || got.Header.OpCode != w.Header.OpCode || !bytes.Equal(got.Payload, w.Payload) {
					t.Fatalf("want %v %q, got %v %q %v", w.Header.OpCode, w.Payload, got.Header.OpCode, got.Payload, err)
				}
			}
			if tt.code == 0 {
				c.sendRaw(gws.NewTextFrame([]byte("still open")))
				if got, err := c.readFrame(5e9); err != nil || string(got.Payload) != "still open" {
					t.Errorf("connection not usable after: %v %v", got.Header.OpCode, err)
				}
				return
			}
			if code := c.expectClose(); code != tt.code {
				t.Errorf("close %d, want %d", code, tt.code)
			}
			if last := tt.steps[len(tt.steps)-1]; last.raw == nil && last.frame.Header.OpCode == gws.OpClose {
				// The client's close, valid or not, ended its side of the
				// handshake: once the server's is out, the server ends TCP,
				// well before the close timeout (RFC 6455 section 7.1.1).
				if _, err := c.readFrame(3e9); err == nil || isTimeout(err) {
					t.Errorf("TCP connection not closed by the server after the close handshake: %v", err)
				}
				return
			}
			c.finishClose()
		})
	}
}

// isTimeout reports whether err is a read deadline, not the peer closing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A second close frame, sent before the server's close arrived, changes
// nothing: the server answers the first and closes TCP. (The second write
// may already meet a closed socket: that is the point.)
func TestCloseAfterClose(t *testing.T) {
	ts := echoServer(t)
	c := dial(t, ts.url("/echo"))
	var b bytes.Buffer
	for range 2 {
		gws.WriteFrame(&b, gws.MaskFrameInPlace(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, ""))))
	}
	if _, err := c.conn.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	if code := c.expectClose(); code != 1000 {
		t.Errorf("close %d, want 1000", code)
	}
	if _, err := c.readFrame(3e9); err == nil || isTimeout(err) {
		t.Errorf("TCP connection not closed by the server: %v", err)
	}
}

// A length that is not minimally encoded is refused with close 1002 and a
// reason that names it (not the bare "protocol error" of other stacks).
func TestNonMinimalLengthReason(t *testing.T) {
	ts := echoServer(t)
	c := dial(t, ts.url("/echo"))
	if _, err := c.conn.Write([]byte{0x81, 0xfe, 0, 5, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'}); err != nil {
		t.Fatal(err)
	}
	f, err := c.readFrame(5 * time.Second)
	if err != nil || f.Header.OpCode != gws.OpClose {
		t.Fatalf("want a close frame, got %v %v", f.Header.OpCode, err)
	}
	if code, reason := closeOf(f); code != 1002 || reason != ws.ErrNonMinimalLength.Error() {
		t.Errorf("close %d %q, want 1002 %q", code, reason, ws.ErrNonMinimalLength.Error())
	}
	c.finishClose()
}
