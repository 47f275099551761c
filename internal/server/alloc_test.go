//go:build linux && !race

package server

import (
	"fmt"
	"testing"
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
