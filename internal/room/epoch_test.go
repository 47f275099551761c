package room

import (
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
)

// A resume names the stream its since belongs to: in another stream of the
// room it gets a gap and the whole history, never a replay from its seq.
func TestReplayHonoursTheEpoch(t *testing.T) {
	h := newHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})}})
	r, res := h.Join([]byte("r"), 0, Resume{}, nil)
	if res.Epoch == "" {
		t.Fatal("a room without an epoch")
	}
	for range 5 {
		r.Publish([]byte(`{"seq":}`), 7, 0, 0, 0)
	}
	for _, tt := range []struct {
		name       string
		rs         Resume
		first, n   uint64 // the replay: its first seq and length
		gap, reset bool
	}{
		{"no since: the whole history", Resume{}, 1, 5, false, false},
		{"since in this stream", Resume{Since: 3, HasSince: true, Epoch: res.Epoch}, 4, 2, false, false},
		{"since without an epoch (an older client)", Resume{Since: 3, HasSince: true}, 4, 2, false, false},
		{"since of another stream, below the seq", Resume{Since: 3, HasSince: true, Epoch: "otherstream"}, 1, 5, true, true},
		{"since of another stream, above the seq", Resume{Since: 9, HasSince: true, Epoch: "otherstream"}, 1, 5, true, true},
		{"since above the seq without an epoch", Resume{Since: 9, HasSince: true}, 1, 5, true, true},
		{"up to date", Resume{Since: 5, HasSince: true, Epoch: res.Epoch}, 0, 0, false, false},
		// A node that lags the stream (its subscription is behind): the
		// client has more than this node holds; nothing to replay, no gap.
		{"since above the seq in this stream", Resume{Since: 9, HasSince: true, Epoch: res.Epoch}, 0, 0, false, false},
	} {
		_, got := h.Join([]byte("r"), 0, tt.rs, nil)
		first := uint64(0)
		if len(got.History) > 0 {
			first = got.History[0].Seq
		}
		if got.Epoch != res.Epoch || first != tt.first || uint64(len(got.History)) != tt.n || got.Gap != tt.gap || got.Reset != tt.reset {
			t.Errorf("%s: epoch %q, replay from %d ×%d, gap %v, reset %v; want %d ×%d, gap %v, reset %v",
				tt.name, got.Epoch, first, len(got.History), got.Gap, got.Reset, tt.first, tt.n, tt.gap, tt.reset)
		}
		wantSeq := uint64(5)
		if tt.rs.Epoch == res.Epoch && tt.rs.Since > wantSeq {
			wantSeq = tt.rs.Since // what the member already has is not delivered again
		}
		if got.Seq != wantSeq {
			t.Errorf("%s: joined seq %d, want %d", tt.name, got.Seq, wantSeq)
		}
		p := r.Poll(tt.rs, nil)
		if uint64(len(p.Messages)) != tt.n || p.Gap != tt.gap || p.Reset != tt.reset || p.Epoch != res.Epoch {
			t.Errorf("%s: poll ×%d gap %v reset %v epoch %q", tt.name, len(p.Messages), p.Gap, p.Reset, p.Epoch)
		}
	}
	// Another hub's room of the same name (a restart, another node without
	// a shared broker) is another stream.
	h2 := newHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})}})
	if _, again := h2.Join([]byte("r"), 0, Resume{}, nil); again.Epoch == res.Epoch {
		t.Error("two streams with one epoch")
	}
}

// downBroker is a broker that reports itself cut off from the cluster.
type downBroker struct{ broker.Broker }

func (downBroker) Stats() broker.Stats { return broker.Stats{} }

// A resume from another stream of the room, while the broker cannot tell
// which stream is current, is not served: the client could be handed back
// a stream it had left, every message of it a second time.
func TestResumeFromAnotherStreamWaitsForTheBroker(t *testing.T) {
	h := newHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})},
		Broker: func(h broker.Handler) (broker.Broker, error) { return downBroker{broker.NewMemory(h.(*Hub))}, nil }})
	r, first := h.Join([]byte("r"), 0, Resume{}, nil)
	for _, tt := range []struct {
		name        string
		rs          Resume
		unavailable bool
	}{
		{"since of another stream", Resume{Since: 3, HasSince: true, Epoch: "otherstream"}, true},
		{"since in this stream", Resume{HasSince: true, Epoch: first.Epoch}, false},
		{"since without an epoch (an older client)", Resume{HasSince: true}, false},
		{"no since", Resume{}, false},
	} {
		before := r.Members()
		_, got := h.Join([]byte("r"), 0, tt.rs, nil)
		joined := r.Members() - before
		if got.Unavailable != tt.unavailable || joined != map[bool]int{true: 0, false: 1}[tt.unavailable] {
			t.Errorf("%s: unavailable %v, %d joined", tt.name, got.Unavailable, joined)
		}
	}
}

// newHub returns the rooms cfg makes, failing the test when it cannot.
func newHub(t testing.TB, cfg Config) *Hub {
	t.Helper()
	h, err := NewHub(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// skip moves the room's seq forward to seq without messages, as if the
// ones in between had been delivered elsewhere: the tests' way to give a
// room seqs of many digits.
func (h *Hub) skip(name string, seq uint64) {
	r := h.lookup([]byte(name))
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loaded && seq > r.seq {
		r.seq = seq
	}
}
