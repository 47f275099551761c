//go:build linux

package loadtest

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
)

// The lab's client answers the server's close frame with the code RFC 6455
// wants (1002 for a malformed one, 1007 for a reason that is not UTF-8),
// and after the closing handshake, its own or the server's, it leaves TCP
// to the server to close (section 7.1.1).
func TestClientClosingHandshake(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte // the server's close frame; nil: the client closes first
		reply   int
	}{
		{"the server's 1000", []byte{0x03, 0xe8}, 1000},
		{"the server's 4001 with a reason", append([]byte{0x0f, 0xa1}, "kicked"...), 4001},
		{"no code", []byte{}, 1000},
		{"one byte", []byte{0x03}, 1002},
		{"a code no peer sends", []byte{0x03, 0xed}, 1002},
		{"a reason that is not UTF-8", []byte{0x03, 0xe8, 0xce, 0xba, 0xe1, 0xbd}, 1007},
		{"the client closes first", nil, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, upgraded := rawServer(t)
			h := newEchoLoop(t, "ws://"+addr, false)
			c := h.start("/")
			conn := <-upgraded
			defer conn.Close()
			if tt.payload != nil {
				if err := gws.WriteFrame(conn, gws.NewFrame(gws.OpClose, true, tt.payload)); err != nil {
					t.Fatal(err)
				}
			} else {
				<-h.st.settled // upgraded: the client is ready
				h.l.call(func() { h.l.closeAll(h.l.clock.now() + closeWaitUs) })
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			//lint:ignore SA1019 the peer is the client under test, whose close frame is bounded
			f, err := gws.ReadFrame(conn)
			if err != nil || f.Header.OpCode != gws.OpClose || len(f.Payload) < 2 {
				t.Fatalf("the client sent %+v (%v), want a close frame", f.Header, err)
			}
			gws.Cipher(f.Payload, f.Header.Mask, 0)
			if code := int(f.Payload[0])<<8 | int(f.Payload[1]); code != tt.reply {
				t.Errorf("the client answered %d, want %d", code, tt.reply)
			}
			if tt.payload == nil {
				if err := gws.WriteFrame(conn, gws.NewCloseFrame(f.Payload)); err != nil {
					t.Fatal(err)
				}
			}
			// The client must not close TCP now: it is the server's turn.
			// (It waits up to closeWaitUs; a fifth of that is enough to see
			// a client that does not wait at all.)
			conn.SetReadDeadline(time.Now().Add(closeWaitUs * time.Microsecond / 5))
			var b [1]byte
			if _, err := conn.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("after the closing handshake the client closed TCP first (%v)", err)
			}
			conn.Close()
			h.wait(t, "/", c)
		})
	}
}

// A server that never closes TCP after the closing handshake does not hold
// the client's socket for longer than closeWaitUs.
func TestClientWaitForTheServerIsBounded(t *testing.T) {
	addr, upgraded := rawServer(t)
	h := newEchoLoop(t, "ws://"+addr, false)
	c := h.start("/")
	conn := <-upgraded
	defer conn.Close()
	start := time.Now()
	if err := gws.WriteFrame(conn, gws.NewCloseFrame(gws.NewCloseFrameBody(gws.StatusNormalClosure, ""))); err != nil {
		t.Fatal(err)
	}
	h.wait(t, "/", c)
	limit := closeWaitUs*time.Microsecond + 2*tickUs*time.Microsecond
	if d := time.Since(start); d > limit {
		t.Fatalf("the client held its socket %v, more than %v", d, limit)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("reading until the client's FIN: %v", err)
	}
}

// rawServer listens on loopback and upgrades its first connection, which it
// hands over raw: the test plays the server frame by frame.
func rawServer(t *testing.T) (addr string, upgraded <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan net.Conn, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		if _, err := gws.Upgrade(conn); err != nil {
			conn.Close()
			return
		}
		ch <- conn
	}()
	return ln.Addr().String(), ch
}
