//go:build linux

package server

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
)

// loopRig is one event loop of a real server that does not run: the test's
// goroutine plays the loop's and calls its deliver and flush itself, so that
// the hot path can be measured and counted step by step. Its connections
// sit on AF_UNIX stream socket pairs; the rig reads their peer ends.
type loopRig struct {
	t     testing.TB
	srv   *Server
	l     *loop
	room  *room.Room
	conns []*conn
	peers []int // the clients' ends, blocking
	buf   []byte

	draft []byte // a chat message as the loop hands it to Room.Publish
	seqAt int

	unread int // bytes flushed since the peers were last read
}

// newLoopRig returns a rig whose loop holds members connections, all
// members of the room "lobby".
func newLoopRig(t testing.TB, members int) *loopRig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Loops = 1
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rig := &loopRig{t: t, srv: srv, l: srv.loops[0], buf: make([]byte, 256<<10)}
	t.Cleanup(rig.close)
	rig.l.nowNano = time.Now().UnixNano()
	for range members {
		rig.connect()
	}
	rig.room = srv.hub.Lookup([]byte("lobby"))
	var f protocol.Frame
	msg := []byte(`{"message_id":12345,"text":"the quick brown fox jumps over the lazy dog 0123456789","sender":"loadtest-0042","sent_at":"2026-11-21T10:00:00.123456Z"}`)
	if err := protocol.ParseFrame(msg, &f); err != nil {
		t.Fatal(err)
	}
	rig.draft, rig.seqAt = protocol.AppendChatDraft(nil, "lobby", time.Now(), &f, msg)
	return rig
}

// connect adds a connection to the loop as an upgrade would (loop.add),
// joined to "lobby".
func (rig *loopRig) connect() *conn {
	rig.t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		rig.t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		rig.t.Fatal(err)
	}
	rig.srv.conns.Add(1) // as admit does: closeFD gives it back
	rig.l.add(command{kind: cmdAdd, fd: fds[0], room: "lobby", id: rig.srv.accepted.Add(1)})
	c := rig.l.conns[fds[0]]
	if c == nil || len(c.rooms) != 1 {
		rig.t.Fatalf("connection not added, or not in its room: %+v", c)
	}
	rig.conns = append(rig.conns, c)
	rig.peers = append(rig.peers, fds[1])
	return c
}

// publish publishes one chat message in the room, from the rig's loop.
func (rig *loopRig) publish() {
	if _, err := rig.room.Publish(rig.draft, rig.seqAt, rig.l.nowNano, rig.l.id, 0); err != nil {
		panic(err) // the memory broker refuses nothing
	}
}

// cycle is the end of one loop iteration: deliver what the queue holds,
// write every connection that got frames, record the processing times.
func (rig *loopRig) cycle() {
	before := rig.l.stats.bytesOut.Load()
	rig.l.deliver()
	rig.l.flushDirty()
	rig.l.observeProcessing()
	rig.unread += int(rig.l.stats.bytesOut.Load() - before)
}

// read reads everything the peers were sent since the last read.
func (rig *loopRig) read() {
	rig.t.Helper()
	want := rig.unread / max(len(rig.peers), 1)
	for _, fd := range rig.peers {
		for got := 0; got < want; {
			n, err := unix.Read(fd, rig.buf[:min(len(rig.buf), want-got)])
			if err != nil || n == 0 {
				rig.t.Fatalf("read the server's frames: %d bytes, %v", n, err)
			}
			got += n
		}
	}
	rig.unread = 0
}

// readFrames reads what peer i was sent since the last read and returns it.
func (rig *loopRig) readFrames(i int) []byte {
	rig.t.Helper()
	var out []byte
	for {
		n, _, err := unix.Recvfrom(rig.peers[i], rig.buf, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) {
			return out
		}
		if err != nil || n == 0 {
			rig.t.Fatalf("read the server's frames: %d bytes, %v", n, err)
		}
		out = append(out, rig.buf[:n]...)
	}
}

// discard drops the frames deliver queued, without writing them, and the
// read times it noted.
func (rig *loopRig) discard() {
	l := rig.l
	for _, c := range l.dirty {
		clear(c.out)
		c.out, c.outHead, c.outOff, c.outBytes, c.dirty = c.out[:0], 0, 0, 0, false
	}
	clear(l.dirty)
	l.dirty = l.dirty[:0]
	l.received = l.received[:0] // the processing times observeProcessing would take
}

func (rig *loopRig) close() {
	for _, c := range rig.conns {
		if c.state != stateClosed {
			c.leaveAll()
			rig.l.closeFD(c)
		}
	}
	for _, fd := range rig.peers {
		unix.Close(fd)
	}
	for _, l := range rig.srv.loops {
		l.poller.Close()
	}
}
