package room

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// wsLike is a Framing with the sizes of a WebSocket server's text frame
// header (RFC 6455 section 5.2: 2 bytes up to 125 of payload, 4 up to
// 65,535, 10 above), so that the rooms' tests count what the server's
// messages cost without the rooms knowing the transport. Its head bytes
// spell the payload's length, for the tests that check where they go.
type wsLike struct{}

func (wsLike) HeadSize(n int) int {
	switch {
	case n <= 125:
		return 2
	case n <= 65535:
		return 4
	}
	return 10
}

func (w wsLike) AppendHead(dst []byte, n int) []byte {
	head := fmt.Sprintf("%0*d", w.HeadSize(n), n)
	return append(dst, head[len(head)-w.HeadSize(n):]...)
}

// maxEntryOverhead is what a history entry may cost beyond its JSON (issue
// 27), for every JSON up to maxEntryJSON bytes: above, the allocator's size
// classes are more than 16 bytes apart and its rounding alone can take
// more (docs/benchmarks-log.md, "History memory per entry").
const (
	maxEntryOverhead = 48
	maxEntryJSON     = 252
)

// TestHistoryEntryCost pins the size of an entry, for every JSON size up to
// maxEntryJSON: its slot in the ring (24 bytes), the frame header in front
// of its JSON and the allocator's rounding of that buffer (Hub.alloc takes
// the capacity the allocator gives, so cost sees the rounding).
func TestHistoryEntryCost(t *testing.T) {
	if entrySize != 24 {
		t.Errorf("a history slot is %d bytes; docs/architecture.md and docs/metrics.md say 24", entrySize)
	}
	h := newHub(t, Config{History: 1, Queues: []*Queue{NewQueue(func() {})}, Framing: wsLike{}})
	hist := newHistory(1, false)
	worst, at := int64(0), 0
	for n := 1; n <= maxEntryJSON; n++ {
		m := h.jsonMessage(1, bytes.Repeat([]byte{'x'}, n))
		if got := hist.cost(toEntry(m)) - int64(n); got > worst {
			worst, at = got, n
		}
	}
	if worst > maxEntryOverhead {
		t.Errorf("an entry of %d bytes of JSON costs %d bytes more; at most %d", at, worst, maxEntryOverhead)
	}
}

// TestMessageHeadAndJSON checks that a message holds its JSON behind the
// framing's head, written once when the message is made, and that a hub
// without framing holds the JSON alone.
func TestMessageHeadAndJSON(t *testing.T) {
	draft := []byte(`{"seq":,"text":"hi"}`)
	for _, tt := range []struct {
		name    string
		framing Framing
		head    string
	}{
		{"websocket-like framing", wsLike{}, "23"},
		{"no framing", nil, ""},
	} {
		h := newHub(t, Config{History: 5, Queues: []*Queue{NewQueue(func() {})}, Framing: tt.framing})
		r, _ := h.Join([]byte("r"), 0, Resume{}, nil)
		h.skip("r", 99)
		if _, err := r.Publish(draft, 7, 0, -1, 0); err != nil {
			t.Fatal(err)
		}
		_, res := h.Join([]byte("r"), 0, Resume{}, nil)
		if len(res.History) != 1 {
			t.Fatalf("%s: %d messages in the history", tt.name, len(res.History))
		}
		m := res.History[0]
		if want := `{"seq":100,"text":"hi"}`; string(m.JSON()) != want || string(m.Framed()) != tt.head+want {
			t.Errorf("%s: JSON %q, framed %q", tt.name, m.JSON(), m.Framed())
		}
		if m.Compressed(func(Message) []byte { return nil }) == nil {
			t.Errorf("%s: a hub without compression compressed", tt.name)
		}
	}
}

// TestHistoryBytesCounted checks the hub's counts through evictions, the
// history budget and freeing: JSON bytes exact, the cost the sum of each
// held message's.
func TestHistoryBytesCounted(t *testing.T) {
	h := newHub(t, Config{History: 3, Grace: time.Nanosecond, Queues: []*Queue{NewQueue(func() {})}, Framing: wsLike{}})
	r, _ := h.Join([]byte("r"), 0, Resume{}, nil)
	for i := range 5 {
		r.Publish([]byte(`{"seq":,"text":"`+strings.Repeat("x", 40*i)+`"}`), 7, 0, -1, 0)
	}
	_, res := h.Join([]byte("r"), 0, Resume{}, nil)
	var json, cost int64
	for _, m := range res.History {
		json += int64(len(m.JSON()))
		cost += r.hist.cost(toEntry(m))
	}
	if h.HistoryEntries() != 3 || h.HistoryJSONBytes() != json || h.HistoryBytes() != cost {
		t.Errorf("entries %d, JSON %d, bytes %d; want 3, %d, %d", h.HistoryEntries(), h.HistoryJSONBytes(), h.HistoryBytes(), json, cost)
	}
	r.Leave(0)
	r.Leave(0)
	if h.Sweep(time.Now().Add(time.Second)) != 1 || h.HistoryEntries() != 0 || h.HistoryJSONBytes() != 0 || h.HistoryBytes() != 0 {
		t.Errorf("after the room was freed: entries %d, JSON %d, bytes %d", h.HistoryEntries(), h.HistoryJSONBytes(), h.HistoryBytes())
	}
}

// What entries really cost on the heap is measured by
// TestAllocsHistoryEntryHeap (alloc_test.go, without the race detector).
