package broker_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// BenchmarkRedisPublishOwned is a cluster owner's whole publish of a room
// whose members are all its own (the node-local fast path), through a real
// room.Hub and against a real redis-server: the broker's checks (overload,
// publishes out, the room held here, the lease: Redis.publishOwned), the
// room's order (Hub.PublishOwned: the look-up, the seq, the frame built
// once, the history ring, a push per loop with members) and keep (the
// followers looked up, the write queued for Redis's next round). Members on
// 2 of 8 loops, which take their queues every 64 messages.
func BenchmarkRedisPublishOwned(b *testing.B) {
	rs := testsupport.StartRedis(b)
	benchPublishOwned(b, func(h broker.Handler) (broker.Broker, error) {
		return broker.NewRedis(broker.Config{URL: rs.URL(), History: 100, TTL: time.Hour}, h)
	})
}

// BenchmarkNATSPublishOwned is BenchmarkRedisPublishOwned on the NATS
// engine (an in-process nats-server): its checks (the bounds, the room held
// here and ordering directly: natsState.ownedFrom, the lease) and keep
// (natsOut: the followers looked up, the history write queued).
func BenchmarkNATSPublishOwned(b *testing.B) {
	url := testsupport.StartNATS(b)
	benchPublishOwned(b, func(h broker.Handler) (broker.Broker, error) {
		return broker.NewNATS(broker.NATSConfig{URL: url, History: 100, TTL: time.Hour}, h)
	})
}

// benchPublishOwned times an owner's publishes into a room whose members
// are all on this node, on the broker mk makes.
func benchPublishOwned(b *testing.B, mk func(broker.Handler) (broker.Broker, error)) {
	queues := make([]*room.Queue, 8)
	for i := range queues {
		queues[i] = room.NewQueue(func() {})
	}
	hub, err := room.NewHub(room.Config{History: 100, Grace: time.Minute, Queues: queues, Broker: mk})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Broker().Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })

	var r *room.Room
	for loop := range 2 {
		r, _ = hub.Join([]byte("lobby"), loop, room.Resume{}, nil)
	}
	draft := []byte(`{"type":"message","room":"lobby","seq":,"text":"the quick brown fox jumps over the lazy dog"}`)
	seqAt := bytes.Index(draft, []byte(`"seq":`)) + len(`"seq":`)
	// Until the node holds the room and its lease lives, a publish goes
	// the long way (to the room's holder: this node, once it loaded it).
	testsupport.Eventually(b, 10*time.Second, "the room ordered here", func() bool {
		seq, err := r.Publish(draft, seqAt, 0, -1, 0)
		return err == nil && seq > 0
	})
	bufs := make([][]room.Delivery, len(queues))
	b.SetBytes(int64(len(draft)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if seq, err := r.Publish(draft, seqAt, 0, 0, 0); err != nil || seq == 0 {
			b.Fatalf("publish %d: seq %d, %v: not ordered here", i, seq, err)
		}
		if i++; i%64 == 0 {
			for j, q := range queues {
				bufs[j] = q.Swap(bufs[j])
			}
		}
	}
}
