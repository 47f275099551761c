//go:build linux

package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/ws"
)

// FuzzUpgradeRequest feeds arbitrary HTTP requests to the checks of the
// upgrade path: they never panic, and what they accept is well formed.
func FuzzUpgradeRequest(f *testing.F) {
	good := "GET /ws/room?since=3 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer abc\r\n\r\n"
	f.Add([]byte(good))
	f.Add([]byte(strings.Replace(good, "13", "8", 1)))
	f.Add([]byte(strings.Replace(good, "/ws/room", "/ws/b%20ad", 1)))
	f.Add([]byte(strings.Replace(good, "since=3", "since=-1&token=x", 1)))
	f.Add([]byte(strings.Replace(good, "since=3", "name=al%00ice&presence=1", 1)))
	f.Add([]byte("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
	f.Add([]byte("POST /ws HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		room := ""
		if name, ok := strings.CutPrefix(req.URL.Path, "/ws/"); ok {
			room = name
		} else if req.URL.Path == "/ws" {
			room = "lobby"
		}
		v := viewOfRequest(req)
		u, ref := parseUpgrade(&v, room)
		if ref != nil {
			switch ref.status {
			case http.StatusBadRequest, http.StatusUnauthorized, http.StatusUpgradeRequired:
			default:
				t.Fatalf("refusal with status %d", ref.status)
			}
			return
		}
		if !ws.ValidClientKey(u.key) || u.room != room || !protocol.ValidUser(u.name) {
			t.Fatalf("accepted %+v", u)
		}
	})
}

// FuzzClientStream feeds arbitrary bytes from a client to a chat
// connection: nothing panics, and every frame queued for the client is a
// valid server frame holding valid JSON.
func FuzzClientStream(f *testing.F) {
	cfg := DefaultConfig()
	cfg.Loops = 1
	cfg.MaxMessageSize = 1024
	srv, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	l := srv.loops[0]
	null, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		f.Fatal(err)
	}
	defer unix.Close(null)
	key := [4]byte{1, 2, 3, 4}
	frame := func(op ws.OpCode, fin bool, p string) []byte {
		return ws.AppendMaskedFrame(nil, op, fin, []byte(p), key)
	}
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	f.Add(frame(ws.OpText, true, `{"text":"hi","message_id":1}`))
	f.Add(cat(frame(ws.OpText, true, `{"type":"join","room":"b","since":0}`), frame(ws.OpText, true, `{"text":"x","room":"b"}`)))
	f.Add(cat(frame(ws.OpText, false, `{"te`), frame(ws.OpPing, true, "p"), frame(ws.OpContinuation, true, `xt":"y"}`)))
	f.Add(cat(frame(ws.OpText, true, `{"type":"leave","room":"fuzz"}`), frame(ws.OpText, true, `{"text":"x"}`)))
	f.Add(frame(ws.OpClose, true, "\x03\xe8bye"))
	f.Add(frame(ws.OpBinary, true, "\x00"))
	f.Add([]byte{0x81, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		fd, err := unix.Dup(null)
		if err != nil {
			t.Fatal(err)
		}
		l.nowNano = time.Now().UnixNano()
		for fd >= len(l.conns) {
			l.conns = append(l.conns, make([]*conn, 1024)...)
		}
		c := &conn{fd: fd, loop: l, lastRead: l.nowNano, opened: l.nowNano, slot: -1, tokens: 40, abuse: 40}
		l.conns[fd] = c
		l.nconns++
		srv.conns.Add(1)
		c.join([]byte("fuzz"), room.Resume{}, true)
		// Feed the bytes in two reads, split where the first byte says.
		split := 0
		if len(data) > 0 {
			split = int(data[0]) % (len(data) + 1)
		}
		l.consume(c, append([]byte(nil), data[:split]...))
		if c.state != stateClosed && split < len(data) {
			k := copy(l.readBuf, c.pending)
			n := copy(l.readBuf[k:], data[split:])
			l.consume(c, l.readBuf[:k+n])
		}
		l.deliver()
		for _, out := range c.out {
			h, hn, err := ws.ParseHeader(out)
			if err != nil || hn == 0 || h.Validate(false) != nil || int64(len(out)-hn) != h.Length {
				t.Fatalf("bad frame queued: %q", out)
			}
			if h.OpCode == ws.OpText {
				p := out[hn:]
				if !utf8.Valid(p) || !json.Valid(p) {
					t.Fatalf("bad JSON queued: %q", p)
				}
			}
		}
		if c.state != stateClosed {
			c.leaveAll()
			l.closeFD(c)
		}
		clear(l.dirty)
		l.dirty = l.dirty[:0]
	})
}
