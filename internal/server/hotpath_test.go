//go:build linux

package server

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/ws"
)

// The figures docs/architecture.md gives of a connection: the size of the
// conn struct, and that a frame in an out queue costs one slice header (the
// bytes are shared).
func TestConnSize(t *testing.T) {
	if got := unsafe.Sizeof(conn{}); got != 360 {
		t.Errorf("a conn is %d bytes; docs/architecture.md says 360: correct one or the other", got)
	}
	if got := unsafe.Sizeof(conn{}.out); got != 24 {
		t.Errorf("an out queue entry is %d bytes; docs/architecture.md says 24", got)
	}
}

// An idle connection holds no buffer but a short out queue: nothing before
// its first frame, and after a flush at most the array of 8 references a
// small burst left (a larger one is dropped), as docs/architecture.md says.
func TestIdleConnBuffers(t *testing.T) {
	rig := newLoopRig(t, 1)
	c := rig.conns[0]
	idle := func(when string, maxCap int) {
		t.Helper()
		if c.pending != nil || c.rd.Pending() || len(c.out) != 0 || c.outBytes != 0 || cap(c.out) > maxCap {
			t.Errorf("%s: pending %d bytes, fragments %v, out %d/%d frames, %d bytes", when, len(c.pending), c.rd.Pending(), len(c.out), cap(c.out), c.outBytes)
		}
		if maxCap == 0 && c.out != nil {
			t.Errorf("%s: out queue not nil", when)
		}
	}
	idle("joined", 0)
	for _, tt := range []struct {
		messages, maxCap int
	}{{3, 8}, {100, 0}, {1, 8}} {
		for range tt.messages {
			rig.publish()
		}
		rig.cycle()
		if got := bytes.Count(rig.readFrames(0), []byte(`"server_at":`)); got != tt.messages {
			t.Fatalf("%d messages written, want %d", got, tt.messages)
		}
		idle(fmt.Sprintf("after a flush of %d frames", tt.messages), tt.maxCap)
	}
}

// syscw returns the number of write system calls (write, writev, ...) the
// calling thread made, from /proc/thread-self/io (task I/O accounting).
func syscw(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	if os.IsNotExist(err) {
		t.Skip("no /proc/thread-self/io: the kernel does not account tasks' I/O")
	}
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no syscw in /proc/thread-self/io: %q", b)
	return 0
}

// One writev per connection, as docs/architecture.md says: a loop that
// delivers 50 messages of a room to 3 members makes 3 write system calls,
// counted by the kernel, and each member gets the 50 frames in order.
func TestOneWritevPerConnection(t *testing.T) {
	rig := newLoopRig(t, 3)
	runtime.LockOSThread() // the kernel counts per thread
	defer runtime.UnlockOSThread()
	before := syscw(t)
	for range 50 {
		rig.publish()
	}
	rig.cycle()
	if got := syscw(t) - before; got != 3 {
		t.Errorf("%d write system calls for 3 connections, want 3", got)
	}
	for i := range rig.peers {
		stream := rig.readFrames(i)
		var r ws.Reader
		for seq := 1; seq <= 50; seq++ {
			f, n, _, err := r.Next(stream, ws.ClientSide, 1<<20)
			if err != nil || n == 0 {
				t.Fatalf("member %d, frame %d: %v (%d bytes left)", i, seq, err, len(stream))
			}
			if want := fmt.Sprintf(`"seq":%d,`, seq); !bytes.Contains(f.Payload, []byte(want)) {
				t.Fatalf("member %d: frame %d is %s", i, seq, f.Payload)
			}
			stream = stream[n:]
		}
		if len(stream) != 0 {
			t.Errorf("member %d: %d bytes after the 50 frames", i, len(stream))
		}
	}
}

// A room message reaches a member as the bytes the room holds: one text
// frame whose header wsFraming wrote once in front of the message's JSON,
// byte for byte the frame ws.AppendFrame makes of that JSON, with each of
// the three header sizes (RFC 6455 section 5.2: 2, 4 and 10 bytes); and a
// long poll's body holds the very same JSON.
func TestRoomMessageOnTheWire(t *testing.T) {
	rig := newLoopRig(t, 2)
	heads := map[int]bool{}
	for _, text := range []int{1, 300, 70000} {
		msg := []byte(fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", text)))
		var f protocol.Frame
		if err := protocol.ParseFrame(msg, &f); err != nil {
			t.Fatal(err)
		}
		rig.draft, rig.seqAt = protocol.AppendChatDraft(nil, "lobby", time.Now(), &f, msg)
		rig.publish()
		rig.cycle()
		res := rig.room.Poll(room.Resume{Since: uint64(len(heads)), HasSince: true}, nil)
		if len(res.Messages) != 1 {
			t.Fatalf("text of %d bytes: %d messages after seq %d", text, len(res.Messages), len(heads))
		}
		m := res.Messages[0]
		want := ws.AppendFrame(nil, ws.OpText, true, m.JSON())
		if !bytes.Equal(m.Framed(), want) {
			t.Errorf("text of %d bytes: the room holds %q…, want the frame %q…", text, head(m.Framed()), head(want))
		}
		for i := range rig.peers {
			if got := rig.readFrames(i); !bytes.Equal(got, want) {
				t.Errorf("text of %d bytes: member %d got %d bytes %q…, want %d %q…", text, i, len(got), head(got), len(want), head(want))
			}
		}
		if body := messagesBody("lobby", 0, res); !bytes.Contains(body, append(append([]byte(`"messages":[`), m.JSON()...), ']')) {
			t.Errorf("text of %d bytes: the poll's body does not hold the message's JSON: %q…", text, head(body))
		}
		heads[len(want)-len(m.JSON())] = true
	}
	if !heads[2] || !heads[4] || !heads[10] {
		t.Errorf("frame header sizes seen: %v, want 2, 4 and 10", heads)
	}
}

func head(b []byte) []byte { return b[:min(len(b), 40)] }
