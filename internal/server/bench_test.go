//go:build linux

package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The benchmarks of the hot path, step by step on a loop that does not run
// (loopRig): a loop's deliver, its flush, and a message from Publish to the
// members' sockets; then the upgrade, on a running server.

// BenchmarkDeliver is a loop's deliver: its queue holds 64 messages of a
// room with members on it, and each member's out queue gets a reference to
// each frame. One op is the delivery of the 64 messages; ns/delivery is
// per member and message. Publishing (before) and writing (after) are
// outside the timer.
func BenchmarkDeliver(b *testing.B) {
	for _, members := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("members-%d", members), func(b *testing.B) {
			rig := newLoopRig(b, members)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for range 64 {
					rig.publish()
				}
				b.StartTimer()
				rig.l.deliver()
				b.StopTimer()
				if got := len(rig.l.dirty); got != members {
					b.Fatalf("%d connections got frames, want %d", got, members)
				}
				rig.discard()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64*members), "ns/delivery")
		})
	}
}

// BenchmarkFlush is a loop writing one connection's queue of frames (the
// same shared frame, as in a busy room) with one writev to a socket pair.
// One op is one flush; the reader's side is outside the timer. A queue of
// more than 8 frames is dropped once written (the loop keeps no large
// array for an idle connection), so 16 and 256 frames pay its growth.
func BenchmarkFlush(b *testing.B) {
	for _, frames := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("frames-%d", frames), func(b *testing.B) {
			rig := newLoopRig(b, 1)
			c := rig.conns[0]
			frame := buildFrameForBench(rig)
			b.SetBytes(int64(frames * len(frame)))
			b.ReportAllocs()
			flushes := 0
			for b.Loop() {
				for range frames {
					c.push(frame)
				}
				before := rig.l.stats.bytesOut.Load()
				rig.l.flushDirty()
				rig.unread += int(rig.l.stats.bytesOut.Load() - before)
				if c.outBytes != 0 {
					b.Fatalf("%d bytes left unwritten", c.outBytes)
				}
				// The socket's buffer counts each write's overhead too: read
				// after 32 writes or 64 KiB, whichever comes first.
				if flushes++; flushes%32 == 0 || rig.unread > 64<<10 {
					b.StopTimer()
					rig.read()
					b.StartTimer()
				}
			}
		})
	}
}

// buildFrameForBench publishes one message and returns its frame, as the
// room built it.
func buildFrameForBench(rig *loopRig) []byte {
	rig.publish()
	rig.l.deliver()
	frame := rig.conns[0].out[len(rig.conns[0].out)-1]
	rig.discard()
	return frame
}

// BenchmarkMessage is one chat message from Room.Publish to the sockets of
// the room's members on a loop: seq, frame, history, queue, deliver, and a
// writev per member. The members' reads are outside the timer; ns/delivery
// is per member.
func BenchmarkMessage(b *testing.B) {
	for _, members := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("members-%d", members), func(b *testing.B) {
			rig := newLoopRig(b, members)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rig.publish()
				rig.cycle()
				if i++; i%64 == 0 {
					b.StopTimer()
					rig.read()
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*members), "ns/delivery")
		})
	}
}

// upgradeRequestText is what a browser sends to join a room.
const upgradeRequestText = "GET /ws/lobby HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: scalechat.v1\r\n\r\n"

// hijackWriter is the http.ResponseWriter of an upgrade served outside
// net/http's connection loop: it hands out the socket it was given.
type hijackWriter struct {
	header http.Header
	conn   net.Conn
	status int
}

func (w *hijackWriter) Header() http.Header         { return w.header }
func (w *hijackWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *hijackWriter) WriteHeader(status int)      { w.status = status }

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.conn, bufio.NewReadWriter(bufio.NewReader(w.conn), bufio.NewWriter(w.conn)), nil
}

// BenchmarkUpgrade is an upgrade answered on an event loop (accept.go), as
// every plain ws:// one is: from the accepted socket (its slot counted and
// registered with the loop's poller, as accept does) to the connection
// joined to its room: the request read and parsed, routed, checked, the
// 101 written. The socket is one end of a socket pair (no TCP accept: that
// is the kernel's). Outside the timer, 64 at a time: the socket pairs made
// and the requests written before, the answers read and the connections
// closed after.
func BenchmarkUpgrade(b *testing.B) {
	rig := newLoopRig(b, 0)
	l := rig.l
	raw := []byte(upgradeRequestText)
	resp := make([]byte, 512)
	type pair struct{ fd, peer int }
	batch := make([]pair, 0, 64)
	hangUp := func() {
		for _, p := range batch {
			if c := l.conns[p.fd]; c != nil {
				c.leaveAll()
				l.closeFD(c)
			}
			unix.Close(p.peer)
		}
		batch = batch[:0]
	}
	defer hangUp()
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		for range min(cap(batch), b.N-done) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, pair{fds[0], fds[1]})
			if _, err := unix.Write(fds[1], raw); err != nil {
				b.Fatal(err)
			}
		}
		l.nowNano = time.Now().UnixNano()
		b.StartTimer()
		for _, p := range batch {
			if h := l.startHandshake(p.fd, rig.srv.takeSlot("127.0.0.1:40000")); h != nil {
				l.readHandshake(h)
			}
		}
		b.StopTimer()
		for _, p := range batch {
			n, err := unix.Read(p.peer, resp)
			if err != nil || !bytes.HasPrefix(resp[:n], []byte("HTTP/1.1 101 ")) || l.conns[p.fd] == nil {
				b.Fatalf("upgrade answered %q, %v", resp[:max(n, 0)], err)
			}
		}
		done += len(batch)
		l.expireHandshakes()
		hangUp()
		b.StartTimer()
	}
}

// BenchmarkUpgradeNetHTTP is an upgrade handled by net/http's handler, as
// over TLS and for an upgrade a loop hands over: the request parsed
// (http.ReadRequest), routed, checked, the 101 written, the socket
// duplicated and handed to a loop, which joins it to its room. The socket
// is one end of a socket pair (no TCP accept, no net/http connection
// goroutine: those are the kernel's and net/http's). Every 128 upgrades the
// clients hang up and, outside the timer, the loops close them.
func BenchmarkUpgradeNetHTTP(b *testing.B) {
	ts := startServer(b, nil)
	raw := []byte(upgradeRequestText)
	resp := make([]byte, 512)
	var open []int
	hangUp := func() {
		for _, fd := range open {
			unix.Close(fd)
		}
		open = open[:0]
		deadline := time.Now().Add(10 * time.Second)
		for ts.conns.Load() != 0 { // the loops see the hang-ups
			if time.Now().After(deadline) {
				b.Fatalf("%d connections still open", ts.conns.Load())
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	defer hangUp()
	b.ReportAllocs()
	for b.Loop() {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		f := os.NewFile(uintptr(fds[0]), "upgrade")
		nc, err := net.FileConn(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			b.Fatal(err)
		}
		req.RemoteAddr = "127.0.0.1:40000"
		w := &hijackWriter{header: http.Header{}, conn: nc}
		ts.http.Handler.ServeHTTP(w, req)
		open = append(open, fds[1])
		n, err := unix.Read(fds[1], resp)
		if err != nil || !bytes.HasPrefix(resp[:n], []byte("HTTP/1.1 101 ")) {
			b.Fatalf("upgrade answered %d %q, %v", w.status, resp[:max(n, 0)], err)
		}
		if len(open) == 128 {
			b.StopTimer()
			hangUp()
			b.StartTimer()
		}
	}
}
