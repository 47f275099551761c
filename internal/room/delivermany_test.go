package room

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
)

// A batch from the broker wakes each loop with members once, after its
// last message, and delivers every message in order; Deliver wakes a loop
// per message.
func TestDeliverManyWakesEachLoopOnce(t *testing.T) {
	var wakes [3]atomic.Int32
	queues := make([]*Queue, len(wakes))
	for i := range queues {
		queues[i] = NewQueue(func() { wakes[i].Add(1) })
	}
	h := newHub(t, Config{History: 10, Grace: time.Minute, Queues: queues})
	h.Join([]byte("a"), 0, Resume{}, nil)
	h.Join([]byte("a"), 1, Resume{}, nil)
	h.Join([]byte("b"), 0, Resume{}, nil) // loop 2 has no member
	for i := range queues {
		queues[i].Swap(nil) // the joins' own deliveries, if any
		wakes[i].Store(0)
	}
	msg := func(room string, seq uint64) broker.Delivered {
		return broker.Delivered{Room: room, Seq: seq, Payload: []byte(`{"seq":` + string(rune('0'+seq)) + `}`)}
	}
	h.DeliverMany([]broker.Delivered{msg("a", 1), msg("b", 1), msg("a", 2), msg("a", 2)}) // the last a duplicate
	want := [][]string{{"a1", "b1", "a2"}, {"a1", "a2"}, nil}
	for i, q := range queues {
		var got []string
		for _, d := range q.Swap(nil) {
			got = append(got, d.Room.Name()+string(rune('0'+d.Seq)))
		}
		if len(got) != len(want[i]) {
			t.Fatalf("loop %d got %q, want %q", i, got, want[i])
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Errorf("loop %d got %q, want %q", i, got, want[i])
			}
		}
		if w, wantWakes := wakes[i].Load(), int32(min(len(want[i]), 1)); w != wantWakes {
			t.Errorf("loop %d woken %d times by one batch, want %d", i, w, wantWakes)
		}
	}
	for i := range wakes {
		wakes[i].Store(0)
	}
	h.DeliverMany([]broker.Delivered{msg("a", 3)})
	h.DeliverMany([]broker.Delivered{msg("a", 4)})
	if w := wakes[0].Load(); w != 2 {
		t.Errorf("two batches of one woke loop 0 %d times, want 2", w)
	}
}
