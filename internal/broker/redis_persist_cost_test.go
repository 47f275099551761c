package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// BenchmarkRedisPersistCost is Redis's side of the history written behind:
// one persist.lua call a round, each room with msgs messages (one run),
// called straight on the node's client, against a real redis-server. It
// reports Redis's own CPU (INFO cpu) per message and per call: what an
// owner's history costs Redis whatever the rounds between nodes cost. With
// one message a room a call, the shape of rooms of 4 at 1 msg/s per client
// under the 5 ms --history-linger, every message pays a room's share of
// the script (its holder read, XADD, counter) and of the call.
func BenchmarkRedisPersistCost(b *testing.B) {
	for _, c := range []struct{ rooms, msgs int }{{1, 1}, {10, 1}, {100, 1}, {10, 4}} {
		b.Run(fmt.Sprintf("rooms=%d/msgs=%d", c.rooms, c.msgs), func(b *testing.B) {
			benchPersistCost(b, c.rooms, c.msgs)
		})
	}
}

func benchPersistCost(b *testing.B, nRooms, msgs int) {
	rs := testsupport.StartRedis(b)
	n := startNode(b, rs.URL(), 100)
	rooms := make([]string, nRooms)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("r%d", i)
	}
	ownRooms(b, n, rooms...)
	ctx := context.Background()
	rc := n.b.roomConfigOf(rooms[0])
	batch := make([]job, 0, nRooms*msgs)
	renew := make([]string, nRooms*msgs)
	for i := range renew {
		renew[i] = "0"
	}
	payload := []byte(`{"type":"message","room":"r","seq":0,"text":"the quick brown fox jumps over the lazy dog"}`)
	round := func(i int) []int64 {
		batch = batch[:0]
		c := call{}
		for _, r := range rooms {
			for m := range msgs {
				c.js = append(c.js, len(batch))
				batch = append(batch, job{kind: jobPersist, room: r, e: Entry{Seq: uint64(2 + i*msgs + m), Payload: payload}})
			}
		}
		var cmd redis.Cmder
		if _, err := n.b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmd = n.b.persistCmd(ctx, p, batch, &c, renew, rc)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		got, err := cmd.(*redis.Cmd).Int64Slice()
		if err != nil {
			b.Fatal(err)
		}
		return got
	}
	// Each room must be stored, not refused: a benchmark of refusals
	// would measure nothing.
	for r, stored := range round(0) {
		if stored != 1 {
			b.Fatalf("room %s refused by persist.lua: %d", rooms[r], stored)
		}
	}
	before := redisCPU(b, n.b.rdb)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		round(i + 1)
	}
	b.StopTimer()
	used := redisCPU(b, n.b.rdb) - before
	b.ReportMetric(used/float64(b.N*nRooms*msgs), "redis-µs/msg")
	b.ReportMetric(used/float64(b.N), "redis-µs/call")
}

// redisCPU is the CPU Redis has used, in µs, from INFO cpu.
func redisCPU(t testing.TB, rdb redis.UniversalClient) float64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var s float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu %s: %v", line, err)
			}
			s += f
		}
	}
	if s == 0 {
		t.Fatal("INFO cpu gave no used_cpu_sys or used_cpu_user")
	}
	return s * 1e6
}
