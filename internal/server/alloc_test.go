//go:build linux && !race

package server

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// The race detector's instrumentation allocates on its own: these run
// without it (scripts/test.sh runs the allocation tests in a step of their
// own).

// TestAllocsMessage pins the hot path's one allocation per message
// (docs/architecture.md: the frame, built once): a message published on a
// loop, delivered to every member there and written to their sockets costs
// that one allocation whatever the number of members, their out queues
// holding references to it. A burst of 8 frames per connection, as small
// as the queue a flush keeps, costs no more.
func TestAllocsMessage(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	for _, tt := range []struct {
		members, burst int
	}{{1, 1}, {10, 1}, {100, 1}, {10, 8}} {
		name := fmt.Sprintf("%d members, %d messages per flush", tt.members, tt.burst)
		rig := newLoopRig(t, tt.members)
		send := func() {
			for range tt.burst {
				rig.publish()
			}
			rig.cycle()
			rig.read()
		}
		for range 200 { // fill the history, grow the loop's buffers
			send()
		}
		sent := rig.l.stats.deliveries.Load()
		got := testing.AllocsPerRun(100, send) / float64(tt.burst)
		if delivered := rig.l.stats.deliveries.Load() - sent; delivered != uint64(101*tt.burst*tt.members) {
			t.Fatalf("%s: %d deliveries, want %d", name, delivered, 101*tt.burst*tt.members)
		}
		if got != 1 {
			t.Errorf("%s: %v allocations per message, want 1", name, got)
		}
	}
}

// TestAllocsUpgrade pins the allocations of an upgrade answered on a loop
// (BenchmarkUpgrade's path: the head read and parsed by upgradeView.parse,
// checked, the 101 written, the connection joined to its room; docs/
// benchmarks-log.md, "Issue 27 part 1"). The upgrade joins a room another
// member holds. With http.ReadRequest it was 29 (BenchmarkUpgrade: 30);
// of the 11 now, the parser's are two strings (the request line, the
// header lines); the others are the slot, the handshake, the admission,
// the conn, its join and its queued frames, and the accept key (a SHA-1
// sum and its base64). BenchmarkUpgrade counts 12: its first upgrade of
// each batch of 64 creates the room.
func TestAllocsUpgrade(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	const want = 11
	rig := newLoopRig(t, 1) // a member holds the room: each upgrade joins it, none creates it
	l := rig.l
	raw := []byte(upgradeRequestText)
	resp := make([]byte, 512)
	upgrades := 0
	upgrade := func() {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fds[1])
		if _, err := unix.Write(fds[1], raw); err != nil {
			t.Fatal(err)
		}
		if h := l.startHandshake(fds[0], rig.srv.takeSlot("127.0.0.1:40000")); h != nil {
			l.readHandshake(h)
		}
		n, err := unix.Read(fds[1], resp)
		c := l.conns[fds[0]]
		if err != nil || !bytes.HasPrefix(resp[:n], []byte("HTTP/1.1 101 ")) || c == nil {
			t.Fatalf("upgrade answered %q, %v", resp[:max(n, 0)], err)
		}
		upgrades++
		c.leaveAll()
		l.closeFD(c)
	}
	for range 50 { // grow the loop's maps and buffers
		upgrade()
	}
	got := testing.AllocsPerRun(100, upgrade)
	if upgrades != 151 {
		t.Fatalf("%d upgrades, want 151", upgrades)
	}
	if got > want {
		t.Errorf("%.1f allocations per upgrade on a loop, want at most %d", got, want)
	}
}
