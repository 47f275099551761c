//go:build !race

package room

import "testing"

// The race detector's instrumentation allocates on its own: these run
// without it (scripts/test.sh runs the allocation tests in a step of their
// own).

// TestAllocsPublish pins docs/architecture.md: "one allocation per
// published message (its frame)", whatever the number of loops with
// members; with compression the message also carries the slot its
// compressed frame is made in on first use. The queues' two buffers
// alternate (queue.go), so a loop taking its deliveries costs nothing.
func TestAllocsPublish(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	for _, tt := range []struct {
		name     string
		spread   int
		compress bool
		want     float64
	}{
		{"members on one loop", 1, false, 1},
		{"members on 4 loops", 4, false, 1},
		{"members on 4 loops, compression", 4, true, 2},
	} {
		pb := newPublishBench(t, 4, tt.spread, tt.compress)
		for range 200 { // fill the history ring and grow the queues' buffers
			if err := pb.room.Publish(benchDraft, benchSeqAt, 0, 0, nil); err != nil {
				t.Fatal(err)
			}
			pb.drain()
		}
		got := testing.AllocsPerRun(100, func() {
			if err := pb.room.Publish(benchDraft, benchSeqAt, 0, 0, nil); err != nil {
				t.Fatal(err)
			}
			if n := pb.drain(); n != tt.spread {
				t.Fatalf("%s: %d deliveries, want %d", tt.name, n, tt.spread)
			}
		})
		if got != tt.want {
			t.Errorf("%s: %v allocations per message, want %v", tt.name, got, tt.want)
		}
	}
}
