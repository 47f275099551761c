//go:build !race

package room

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

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
			if _, err := pb.room.Publish(benchDraft, benchSeqAt, 0, 0, 0); err != nil {
				t.Fatal(err)
			}
			pb.drain()
		}
		got := testing.AllocsPerRun(100, func() {
			if _, err := pb.room.Publish(benchDraft, benchSeqAt, 0, 0, 0); err != nil {
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

// TestAllocsHistoryEntryHeap measures what history entries cost on the
// heap (runtime.MemStats, after a collection) as a node holds them: a
// room's full ring of chat messages of a given JSON size behind a
// WebSocket-sized header. It fails when an entry costs more than its JSON
// and maxEntryOverhead, or when scalechat_history_bytes (Hub.HistoryBytes)
// is not what the heap says. With compression an entry also holds the slot
// and cell of its compressed frame (zSize), not yet made here.
func TestAllocsHistoryEntryHeap(t *testing.T) {
	const held = 4000
	for _, tt := range []struct {
		json     int
		compress bool
	}{
		{64, false}, {126, false}, {200, false}, {240, false}, {maxEntryJSON, false}, {240, true},
	} {
		t.Run(fmt.Sprintf("%dB-json-compression-%v", tt.json, tt.compress), func(t *testing.T) {
			h := newHub(t, Config{History: held, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})}, Framing: wsLike{}, Compression: tt.compress})
			r := h.Open([]byte("r")) // no member: no delivery is queued and kept
			h.skip("r", 99999)       // seqs of 6 digits: every message the same size
			prefix, suffix := `{"seq":`, `,"text":"`
			draft := []byte(prefix + suffix + strings.Repeat("x", tt.json-len(prefix)-6-len(suffix)-2) + `"}`)
			before := heapInUse()
			for range held {
				if _, err := r.Publish(draft, len(prefix), 0, -1, 0); err != nil {
					t.Fatal(err)
				}
			}
			perEntry := float64(heapInUse()-before) / held
			runtime.KeepAlive(h)
			if got := h.HistoryJSONBytes(); got != int64(held*tt.json) || h.HistoryEntries() != held {
				t.Fatalf("%d entries of %d bytes of JSON in all, want %d of %d", h.HistoryEntries(), got, held, held*tt.json)
			}
			counted := float64(h.HistoryBytes()) / held
			budget := float64(tt.json + maxEntryOverhead)
			if tt.compress {
				budget += float64(zSize)
			}
			t.Logf("%d bytes of JSON: %.1f bytes per entry on the heap, %.1f counted", tt.json, perEntry, counted)
			if perEntry > budget {
				t.Errorf("an entry of %d bytes of JSON costs %.1f bytes on the heap; at most %.0f", tt.json, perEntry, budget)
			}
			// The ring's array (24 bytes a slot, counted in each entry)
			// may be rounded up by the allocator: a few bytes per entry.
			if d := perEntry - counted; d < -1 || d > 4 {
				t.Errorf("scalechat_history_bytes counts %.1f bytes per entry, the heap holds %.1f", counted, perEntry)
			}
		})
	}
}

// heapInUse returns the bytes of live heap objects after a collection
// (two: the first moves what sync.Pools hold aside, the second frees it).
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
