package room

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
)

// kept records what an owned room hands the broker to store.
type kept []broker.Entry

func (k *kept) keep(_ string, e broker.Entry) { *k = append(*k, e) }

// gatedBroker is a single node's broker with a broker.JoinGate, as a
// cluster's broker has: the rooms' joins wait while wait is set.
type gatedBroker struct {
	*broker.Memory
	wait atomic.Bool
}

func (g *gatedBroker) JoinsWait(string) bool { return g.wait.Load() }

// newGatedHub returns a hub whose broker holds its joins back at will.
func newGatedHub(t testing.TB, cfg Config) (*Hub, *gatedBroker) {
	g := &gatedBroker{}
	cfg.Broker = func(h broker.Handler) (broker.Broker, error) {
		g.Memory = broker.NewMemory(h.(*Hub))
		return g, nil
	}
	return newHub(t, cfg), g
}

// A room the broker owns here orders messages only once the seqs handed out
// before (up to from) came back; what it orders goes to the broker in seq
// order, as the members get it. Whether the node holds the room and its
// lease lives is the broker's to check: the room is asked only when so.
func TestPublishOwned(t *testing.T) {
	q := NewQueue(func() {})
	h := newHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{q}})
	pub := func(text string) broker.Publication {
		return broker.Publication{Room: "r", Prefix: []byte(`{"text":"` + text + `","seq":`), Suffix: []byte(`}`)}
	}
	var k kept
	steps := []struct {
		name  string
		setup func()
		from  uint64
		want  bool
	}{
		{"not here", func() {}, 0, false},
		{"here", func() { h.Join([]byte("r"), 0, Resume{}, nil) }, 0, true},
		{"owned from a seq not yet here", func() {}, 5, false},
		{"the seqs before came", func() { h.DeliverMany([]broker.Delivered{{Room: "r", Seq: 5, Payload: []byte(`{"seq":5}`)}}) }, 5, true},
		{"past from", func() {}, 5, true},
		{"dropped", func() {
			var last uint64
			if !h.Drop("r", func(_ string, seq uint64, _ []broker.Entry) { last = seq }) || last != 7 {
				t.Errorf("drop: keep got seq %d, want 7", last)
			}
		}, 0, false},
	}
	for _, s := range steps {
		s.setup()
		seq, got := h.PublishOwned(pub(s.name), s.from, k.keep)
		if got != s.want {
			t.Errorf("%s: published %v, want %v", s.name, got, s.want)
		}
		if got && (len(k) == 0 || seq != k[len(k)-1].Seq) {
			t.Errorf("%s: PublishOwned returned seq %d, kept %+v", s.name, seq, k)
		}
	}
	if len(k) != 3 || k[0].Seq != 1 || k[1].Seq != 6 || k[2].Seq != 7 {
		t.Fatalf("kept %+v, want seqs 1, 6, 7", k)
	}
	if string(k[1].Payload) != `{"text":"the seqs before came","seq":6}` {
		t.Errorf("kept payload %q", k[1].Payload)
	}
	// The members got the same frames, in the same order, then the drop.
	var seqs []uint64
	var dropped bool
	for _, d := range q.Swap(nil) {
		switch {
		case d.Dropped:
			dropped = true
		case !d.Ready:
			seqs = append(seqs, d.Seq)
		}
	}
	if len(seqs) != 4 || seqs[0] != 1 || seqs[1] != 5 || seqs[2] != 6 || seqs[3] != 7 || !dropped {
		t.Errorf("delivered seqs %v and dropped %v, want 1 5 6 7 and true", seqs, dropped)
	}
}

// While the broker holds joins back (an owning node whose lease lapsed:
// the room may be another node's by now), joiners wait. LeaseRenewed lets
// them in (the broker gives it once it has dropped the rooms taken over);
// Drop frees the room and tells the loops to close its members and rejoin
// its joiners.
func TestOwnedRoomJoinsWaitForTheLease(t *testing.T) {
	q := NewQueue(func() {})
	h, g := newGatedHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{q}})
	h.Join([]byte("r"), 0, Resume{}, nil)
	g.wait.Store(true)
	if _, res := h.Join([]byte("r"), 0, Resume{}, nil); !res.Pending {
		t.Fatal("a join of an owned room went in with the lease lapsed")
	}
	g.wait.Store(false)
	h.LeaseRenewed()
	if ds := q.Swap(nil); len(ds) != 1 || !ds[0].Ready {
		t.Fatalf("after the lease came back the loop got %+v, want one Ready", ds)
	}
	if _, res := h.Join([]byte("r"), 0, Resume{}, nil); res.Pending {
		t.Fatal("a join waited with the lease back")
	}
	g.wait.Store(true)
	if _, res := h.Join([]byte("r"), 0, Resume{}, nil); !res.Pending {
		t.Fatal("a join of an owned room went in with the lease lapsed again")
	}
	if !h.Drop("r", nil) {
		t.Fatal("Drop found no room")
	}
	ds := q.Swap(nil)
	if len(ds) != 1 || !ds[0].Dropped {
		t.Fatalf("after Drop the loop got %+v, want one Dropped", ds)
	}
	if !ds[0].Room.Closed() || h.Lookup([]byte("r")) != nil {
		t.Error("the dropped room is still there")
	}
	if h.Rooms() != 0 || h.HistoryEntries() != 0 {
		t.Errorf("rooms %d, history entries %d after the drop", h.Rooms(), h.HistoryEntries())
	}
	g.wait.Store(false)
	r, res := h.Join([]byte("r"), 0, Resume{}, nil)
	if r == ds[0].Room || res.Pending || res.Seq != 0 {
		t.Errorf("rejoining made %p (dropped %p), %+v: want a new room", r, ds[0].Room, res)
	}
}

// A room whose joiner waits (here for the owner's lease to be checked) is
// not swept as empty, however short the grace: freed, it would never load,
// and the joiner would wait for good.
func TestSweepKeepsARoomWithJoinersWaiting(t *testing.T) {
	q := NewQueue(func() {})
	h, g := newGatedHub(t, Config{History: 10, Grace: time.Millisecond, Queues: []*Queue{q}})
	r, _ := h.Join([]byte("r"), 0, Resume{}, nil)
	r.Leave(0)
	g.wait.Store(true)
	if _, res := h.Join([]byte("r"), 0, Resume{}, nil); !res.Pending {
		t.Fatal("a join of an owned room went in with the lease lapsed")
	}
	if n := h.Sweep(time.Now().Add(time.Hour)); n != 0 || h.Lookup([]byte("r")) == nil {
		t.Fatalf("swept %d rooms: the room with a joiner waiting was freed", n)
	}
	g.wait.Store(false)
	h.LeaseRenewed()
	if ds := q.Swap(nil); len(ds) != 1 || !ds[0].Ready {
		t.Fatalf("after the lease came back the loop got %+v, want one Ready", ds)
	}
}

// Drop hands keep, under the room's lock, the room's epoch and every
// message its history held, as the members got them: what a follower
// writes behind a gone owner (the Redis broker's fillFrom).
func TestDropHandsKeepTheHistory(t *testing.T) {
	h := newHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})}})
	r, joined := h.Join([]byte("r"), 0, Resume{}, nil)
	for _, text := range []string{"a", "b", "c"} {
		if _, err := r.Publish([]byte(`{"text":"`+text+`","seq":}`), len(`{"text":"`+text+`","seq":`), 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	var epoch string
	var seq uint64
	var tail []broker.Entry
	if !h.Drop("r", func(e string, s uint64, t []broker.Entry) { epoch, seq, tail = e, s, t }) {
		t.Fatal("the room was not dropped")
	}
	if epoch != joined.Epoch || seq != 3 || len(tail) != 3 {
		t.Fatalf("keep got epoch %q, seq %d and %d messages, want %q, 3 and 3", epoch, seq, len(tail), joined.Epoch)
	}
	for i, e := range tail {
		if want := fmt.Sprintf(`{"text":"%c","seq":%d}`, 'a'+i, i+1); e.Seq != uint64(i+1) || string(e.Payload) != want {
			t.Errorf("message %d: seq %d %s, want %s", i, e.Seq, e.Payload, want)
		}
	}
}
