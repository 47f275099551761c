package room

import (
	"fmt"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
)

// benchDraft is a chat message as a loop hands it to Room.Publish: the
// broadcast JSON with the seq's digits to be inserted at benchSeqAt.
var (
	benchDraft = []byte(`{"type":"message","room":"lobby","seq":,"message_id":12345,"text":"the quick brown fox jumps over the lazy dog 0123456789","sender":"loadtest-0042","sent_at":"2026-11-21T10:00:00.123456Z","server_at":"2026-11-21T10:00:00.124031Z"}`)
	benchSeqAt = len(`{"type":"message","room":"lobby","seq":`)
)

// publishBench is a hub of loops queues with a room whose members sit on
// the first spread of them.
type publishBench struct {
	hub    *Hub
	queues []*Queue
	room   *Room
	bufs   [][]Delivery // what each loop swaps its queue with
}

func newPublishBench(t testing.TB, loops, spread int, compress bool) *publishBench {
	pb := &publishBench{queues: make([]*Queue, loops), bufs: make([][]Delivery, loops)}
	for i := range pb.queues {
		pb.queues[i] = NewQueue(func() {})
	}
	pb.hub = newHub(t, Config{History: 100, Grace: time.Minute, Queues: pb.queues, Compression: compress})
	for i := range spread {
		r, res := pb.hub.Join([]byte("lobby"), i, Resume{}, nil)
		if res.Pending || res.Full {
			t.Fatalf("join on loop %d: %+v", i, res)
		}
		pb.room = r
	}
	return pb
}

// drain is each loop's deliver taking its queue: the queues alternate two
// buffers, as the server's loops do. It returns the deliveries taken.
func (pb *publishBench) drain() int {
	n := 0
	for i, q := range pb.queues {
		pb.bufs[i] = q.Swap(pb.bufs[i])
		n += len(pb.bufs[i])
	}
	return n
}

// BenchmarkPublish is Room.Publish on a single node (the room orders it
// itself: broker.Memory has nothing to do): seq, the frame built once, the history ring and one
// queue push per loop with members. The loops take their queues every 64
// messages, as a busy loop would.
func BenchmarkPublish(b *testing.B) {
	for _, spread := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("members-on-%d-loops", spread), func(b *testing.B) {
			pb := newPublishBench(b, 8, spread, false)
			b.SetBytes(int64(len(benchDraft)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := pb.room.Publish(benchDraft, benchSeqAt, 0, 0, 0); err != nil {
					b.Fatal(err)
				}
				if i++; i%64 == 0 {
					if got := pb.drain(); got != 64*spread {
						b.Fatalf("%d deliveries queued, want %d", got, 64*spread)
					}
				}
			}
		})
	}
}

// BenchmarkPublishOwned is a cluster owner's order (Hub.PublishOwned, as
// the Redis broker calls it): the room looked up by name, its admission
// checks, the same order as BenchmarkPublish's, and keep handed the
// message (here it drops it). Members on 2 of 8 loops.
func BenchmarkPublishOwned(b *testing.B) {
	pb := newPublishBench(b, 8, 2, false)
	p := broker.Publication{Room: "lobby", Prefix: benchDraft[:benchSeqAt], Suffix: benchDraft[benchSeqAt:], From: 0}
	keep := func(string, broker.Entry) {}
	b.SetBytes(int64(len(benchDraft)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := pb.hub.PublishOwned(p, 0, keep); !ok {
			b.Fatal("an owned room declined a publish")
		}
		if i++; i%64 == 0 {
			if got := pb.drain(); got != 64*2 {
				b.Fatalf("%d deliveries queued, want %d", got, 64*2)
			}
		}
	}
}

// BenchmarkLeaseRenewed is what a lease after a lapsed one costs the rooms,
// with 10,000 of them: a look at every room (a renewal of a live lease,
// every second, is the broker's atomic word and reaches no room).
func BenchmarkLeaseRenewed(b *testing.B) {
	h := newHub(b, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})}})
	for i := range 10_000 {
		h.Join([]byte(fmt.Sprintf("room-%d", i)), 0, Resume{}, nil)
	}
	b.ReportAllocs()
	for b.Loop() {
		h.LeaseRenewed()
	}
}

// BenchmarkQueue is the hand-over from a room to a loop: a push from the
// publisher and the loop's Swap, every 64 pushes.
func BenchmarkQueue(b *testing.B) {
	q := NewQueue(func() {})
	var buf []Delivery
	m := Message{Seq: 1, data: benchDraft}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q.push(Delivery{Message: m}, true)
		if i++; i%64 == 0 {
			if buf = q.Swap(buf); len(buf) != 64 {
				b.Fatalf("swapped %d deliveries, want 64", len(buf))
			}
		}
	}
}

// BenchmarkDeliverMany is a batch from the broker reaching the rooms of a
// cluster node (Hub.DeliverMany, as after a node channel's payload or an
// owner's records): 64 messages over 16 rooms with members on two loops,
// each message's frame made once and pushed to both loops' queues, which
// are taken after every batch.
func BenchmarkDeliverMany(b *testing.B) {
	const rooms, batch = 16, 64
	pb := newPublishBench(b, 8, 0, false)
	for i := range rooms {
		for loop := range 2 {
			if _, res := pb.hub.Join(fmt.Appendf(nil, "room-%d", i), loop, Resume{}, nil); res.Pending || res.Full {
				b.Fatalf("join: %+v", res)
			}
		}
	}
	msgs := make([]broker.Delivered, batch)
	seqs := make([]uint64, rooms)
	names := make([]string, rooms)
	for i := range names {
		names[i] = fmt.Sprintf("room-%d", i)
	}
	b.SetBytes(int64(batch * len(benchDraft)))
	b.ReportAllocs()
	for b.Loop() {
		for i := range msgs {
			r := i % rooms
			seqs[r]++
			msgs[i] = broker.Delivered{Room: names[r], Seq: seqs[r], Payload: benchDraft}
		}
		pb.hub.DeliverMany(msgs)
		if got := pb.drain(); got != 2*batch {
			b.Fatalf("%d deliveries queued, want %d", got, 2*batch)
		}
	}
}

// nopTracker is a Tracker that does nothing: the rooms' calls into it are
// what BenchmarkJoinLeave counts.
type nopTracker struct{}

func (nopTracker) Presence(string, string, int)     {}
func (nopTracker) Published(string, uint64, []byte) {}

// BenchmarkJoinLeave is a member's join and leave of a room that stays (a
// member holds it): Join, AddUser (presence told the tracker under the
// room's lock), RemoveUser, Leave; and a room made and dropped (Open,
// Drop), whose Subscribe and Unsubscribe go through the shard's queue.
func BenchmarkJoinLeave(b *testing.B) {
	b.Run("join-leave", func(b *testing.B) {
		h := newHub(b, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})}, Tracker: nopTracker{}})
		name := []byte("lobby")
		h.Join(name, 0, Resume{}, nil)
		b.ReportAllocs()
		for b.Loop() {
			r, _ := h.Join(name, 0, Resume{}, nil)
			r.AddUser("u")
			r.RemoveUser("u")
			r.Leave(0)
		}
	})
	b.Run("make-drop", func(b *testing.B) {
		h := newHub(b, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})}})
		name := []byte("lobby")
		b.ReportAllocs()
		for b.Loop() {
			h.Open(name)
			h.Drop("lobby", nil)
		}
	})
}
