package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// BenchmarkRedisPersistOwned is the node's side of storing what owned rooms
// ordered (keep, then the publish loop's rounds of persist calls) against a
// real redis-server: 16 rooms owned by one node, each message queued as a
// room queues it, until Redis holds every room's last seq. calls/msg is the
// script calls a message cost.
func BenchmarkRedisPersistOwned(b *testing.B) {
	rs := testsupport.StartRedis(b)
	n := startNode(b, rs.URL(), 100)
	rooms := make([]string, 16)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("r%d", i)
		n.join(b, rooms[i])
		n.publish(rooms[i], "first") // seq 1, through Redis: the grant
		r := rooms[i]
		n.h.waitFor(b, 10*time.Second, r+" to be granted", func() bool { return n.h.rooms[r].owned && n.h.rooms[r].seq == 1 })
	}
	before := evalshaCalls(b, n)
	payload := []byte(`{"type":"message","room":"r","seq":0,"text":"the quick brown fox jumps over the lazy dog"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		n.b.keep(rooms[i%len(rooms)], Entry{Seq: uint64(2 + i/len(rooms)), Payload: payload})
	}
	ctx := context.Background()
	for i, r := range rooms {
		last := uint64(1 + b.N/len(rooms))
		if i < b.N%len(rooms) {
			last++
		}
		testsupport.Eventually(b, 10*time.Second, r+" stored", func() bool {
			got, _ := n.b.rdb.Get(ctx, n.b.seqKey(r)).Uint64()
			return got >= last
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(evalshaCalls(b, n)-before)/float64(b.N), "calls/msg")
}
