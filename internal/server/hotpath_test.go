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
	"unsafe"

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
