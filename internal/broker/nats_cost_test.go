package broker

// What a cluster engine on NATS would cost the NATS server, measured
// beside what the Redis engine costs Redis for the same traffic (issue 34,
// the design of a second cluster engine on NATS). Each benchmark runs the
// real servers (the nats-server binary, redis-server) and reports the
// server's own CPU time (utime+stime of nats-server's process from
// /proc/<pid>/stat; Redis's INFO cpu, as BenchmarkRedisPersistCost does)
// per unit of work, so that the engine's design can be sized against its
// target: at most 1 µs of NATS server CPU per delivery for rooms of 4
// split 2+2 over two nodes at 1 msg/s per client.
//
// The shapes are the Redis engine's (redis_publish.go, redis_nodechan.go,
// redis_followwire.go):
//
//   - BenchmarkNodeChannelCost: an owner's round of ordered messages for
//     another node, its records concatenated in one payload on that node's
//     channel (NATS core subject scalechat.node.B; a Redis PUBLISH),
//     received by the node's own connection. mode=paced sends one payload
//     at a time and waits for the other node to get it, as rounds of 1–5
//     ms do at the target's load (each payload its own read and write on
//     the server); mode=burst sends them back to back (NATS: the client
//     buffers, nc.Flush at the end; Redis: pipelines of 64 PUBLISHes), the
//     server's cost when it reads and writes many payloads at once.
//   - BenchmarkHistoryWriteCost: the history written behind, one stream
//     message a room a round carrying its run of messages, published
//     asynchronously and every ack awaited before the next round (as a
//     round waits for persist.lua's answer); Redis's side is
//     BenchmarkRedisPersistCost.
//   - BenchmarkKVCost: a node's lease renewed (every second in the engine)
//     and a room's holder changed by compare-and-set (at claim, handover,
//     takeover), on a JetStream KV bucket and on Redis.

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// costJSON is a chat message as the engine carries it (~95 bytes): with its
// room and seq, an M record of ~120 bytes (costRecord).
var costJSON = []byte(`{"type":"message","room":"room-00042","seq":123456,"text":"the quick brown fox jumps over the lazy dog"}`)

// costRecord appends the i-th record of a payload: an M record of a room.
func costRecord(b []byte, i int) []byte {
	return appendMessage(b, fmt.Sprintf("room-%05d", i%100000), uint64(100000+i), costJSON)
}

// costPayload is a node channel's payload of n records, as sendPayload
// makes it: the mark, the round's T record, then the records.
func costPayload(n int) []byte {
	p := appendUint([]byte{followMark, recTime}, uint64(time.Now().UnixNano()))
	for i := range n {
		p = costRecord(p, i)
	}
	return p
}

// costRun is a room's run of n messages (M records) for its history.
func costRun(room, n int) []byte {
	var p []byte
	for range n {
		p = costRecord(p, room)
	}
	return p
}

// procCPU is the CPU time process pid has used, in µs (procstat: utime
// and stime, in 10 ms ticks). At 10 ms a tick, a run must keep the server
// busy a second or more for a figure within a few percent.
func procCPU(t testing.TB, pid int) float64 {
	t.Helper()
	if pid == 0 {
		t.Fatal("the server does not run")
	}
	st, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return float64(st.CPU.Microseconds())
}

// minServerCPU is the least server CPU, in µs, a run must measure for its
// figures to mean anything: five of the process clock's 10 ms ticks.
const minServerCPU = 50_000

// reportServerCPU reports used, the server's CPU in µs, divided by each
// count, under its unit; a run too short for the server's clock (CI runs
// each benchmark once) reports none and says so, rather than a zero.
func reportServerCPU(b *testing.B, used float64, per map[string]int) {
	if used < minServerCPU {
		b.Logf("the server used %.0f µs of CPU in %d iterations: too little for its 10 ms clock, no figure (run with a larger -benchtime)", used, b.N)
		return
	}
	for unit, n := range per {
		b.ReportMetric(used/float64(n), unit)
	}
}

// costNATS runs a nats-server process and returns it with a function
// reading its CPU in µs.
func costNATS(b *testing.B) (*testsupport.NATSProcess, func() float64) {
	b.Helper()
	srv := testsupport.StartNATSProcess(b)
	pid := srv.Pid()
	return srv, func() float64 { return procCPU(b, pid) }
}

// natsConn connects to url until the benchmark ends; the connection's
// asynchronous errors (a slow consumer) come on errs, the first of them
// (errs has room for one; the rest are dropped).
func natsConn(b *testing.B, url string, errs chan error) *nats.Conn {
	b.Helper()
	nc, err := nats.Connect(url, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

// costJetStream runs a nats-server process and returns a JetStream client
// of it with a function reading the server's CPU in µs.
func costJetStream(b *testing.B) (jetstream.JetStream, func() float64) {
	b.Helper()
	srv, cpu := costNATS(b)
	js, err := jetstream.New(natsConn(b, srv.URL(), make(chan error, 1)))
	if err != nil {
		b.Fatal(err)
	}
	return js, cpu
}

// costRedis runs a redis-server and returns a client of it with a
// function reading its CPU in µs.
func costRedis(b *testing.B) (*testsupport.Redis, *redis.Client, func() float64) {
	b.Helper()
	rs := testsupport.StartRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	return rs, rdb, func() float64 { return redisCPU(b, rdb) }
}

// BenchmarkNodeChannelCost is the owner protocol's rounds between two
// nodes: node A's connection sends b.N payloads of records (M records of
// ~120 bytes) to node B's channel, which B's own connection reads; the
// timer stops once B got them all, so the server did all its work. It
// reports the server's CPU per payload (a round's publish) and per record.
func BenchmarkNodeChannelCost(b *testing.B) {
	for _, mode := range []string{"paced", "burst"} {
		for _, records := range []int{1, 4, 16, 64} {
			for _, engine := range []string{"nats", "redis"} {
				b.Run(fmt.Sprintf("engine=%s/mode=%s/records=%d", engine, mode, records), func(b *testing.B) {
					benchNodeChannel(b, engine, mode == "paced", records)
				})
			}
		}
	}
}

// received counts what node B got and signals when the count reaches
// want.
type received struct {
	n, want atomic.Int64
	done    chan struct{}
}

func (r *received) got() {
	if r.n.Add(1) == r.want.Load() {
		r.done <- struct{}{}
	}
}

// wait waits for the signal, failing on an asynchronous error or when
// nothing comes within a minute.
func (r *received) wait(b *testing.B, errs <-chan error, watchdog *time.Timer) {
	watchdog.Reset(time.Minute)
	select {
	case <-r.done:
	case err := <-errs:
		b.Fatalf("node B: %v", err)
	case <-watchdog.C:
		b.Fatalf("node B got %d of %d payloads within a minute", r.n.Load(), r.want.Load())
	}
}

func benchNodeChannel(b *testing.B, engine string, paced bool, records int) {
	payload := costPayload(records)
	r := &received{done: make(chan struct{}, 1)}
	var (
		publish func() error // one payload
		burst   func(n int)  // n payloads, back to back
		cpu     func() float64
		errs    <-chan error
	)
	switch engine {
	case "nats":
		srv, natsCPU := costNATS(b)
		cpu = natsCPU
		natsErrs := make(chan error, 1)
		pub := natsConn(b, srv.URL(), natsErrs)
		sub := natsConn(b, srv.URL(), natsErrs)
		errs = natsErrs
		if _, err := sub.Subscribe("scalechat.node.B", func(*nats.Msg) { r.got() }); err != nil {
			b.Fatal(err)
		}
		if err := sub.Flush(); err != nil { // the subscription is the server's
			b.Fatal(err)
		}
		publish = func() error { return pub.Publish("scalechat.node.B", payload) }
		burst = func(n int) {
			for range n {
				if err := pub.Publish("scalechat.node.B", payload); err != nil {
					b.Fatal(err)
				}
			}
			if err := pub.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	case "redis":
		rs, rdb, redisCPU := costRedis(b)
		cpu = redisCPU
		ctx := context.Background()
		subc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
		ps := subc.Subscribe(ctx, "scalechat:node:B")
		if _, err := ps.Receive(ctx); err != nil { // the subscription confirmed
			b.Fatal(err)
		}
		subErrs := make(chan error, 1)
		stopped := make(chan struct{})
		var closing atomic.Bool
		go func() {
			defer close(stopped)
			for {
				if _, err := ps.ReceiveMessage(ctx); err != nil {
					if !closing.Load() {
						subErrs <- err
					}
					return
				}
				r.got()
			}
		}()
		b.Cleanup(func() {
			closing.Store(true)
			_ = ps.Close()
			<-stopped
			_ = subc.Close()
		})
		errs = subErrs
		publish = func() error {
			n, err := rdb.Publish(ctx, "scalechat:node:B", payload).Result()
			if err == nil && n != 1 {
				err = fmt.Errorf("PUBLISH reached %d subscribers, not 1", n)
			}
			return err
		}
		burst = func(n int) {
			for n > 0 {
				k := min(n, 64)
				n -= k
				if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for range k {
						p.Publish(ctx, "scalechat:node:B", payload)
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	watchdog := time.NewTimer(time.Minute)
	defer watchdog.Stop()
	// One payload there and back first: both connections are set up.
	r.want.Store(1)
	if err := publish(); err != nil {
		b.Fatal(err)
	}
	r.wait(b, errs, watchdog)

	before := cpu()
	b.ReportAllocs()
	b.ResetTimer()
	if paced {
		for i := range b.N {
			r.want.Store(int64(i) + 2)
			if err := publish(); err != nil {
				b.Fatal(err)
			}
			r.wait(b, errs, watchdog)
		}
	} else {
		r.want.Store(int64(b.N) + 1)
		burst(b.N)
		r.wait(b, errs, watchdog)
	}
	b.StopTimer()
	used := cpu() - before
	reportServerCPU(b, used, map[string]int{"server-µs/publish": b.N, "server-µs/record": b.N * records})
}

// historyPerRoom is the stream messages each room's subject keeps
// (MaxMsgsPerSubject): a history of 1,000, a run of messages each (so
// 1,000 messages or more). Before the timer starts every room has them
// all, so that each write also removes the room's oldest, as in a room
// that has lived a while.
const historyPerRoom = 1000

// BenchmarkHistoryWriteCost is the history written behind on JetStream:
// one stream (subjects scalechat.hist.>, a subject a room), and a round
// (b.N of them) publishes, for each of rooms rooms, one stream message
// carrying its run of msgs messages (M records of ~120 bytes), all
// asynchronously, then waits for every ack. It reports the NATS server's
// CPU per room written (a stream message) and per message. The fenced
// engine makes each write conditional on the room's last sequence
// (Nats-Expected-Last-Subject-Sequence), the JetStream counterpart of
// persist.lua's holder check. The redis engine is
// BenchmarkRedisPersistCost's (its metrics: redis-µs/msg, redis-µs/call,
// a call a round) for the same shapes, run beside them. Rooms of 4 split
// 2+2 at 1 msg/s per client make a node's rounds of 10 rooms of 1 message
// under a 5 ms history linger, and of 500 rooms of 4 messages under the
// 1 s linger of followed rooms (DefaultFollowedLinger).
func BenchmarkHistoryWriteCost(b *testing.B) {
	for _, c := range []struct{ rooms, msgs int }{{1, 1}, {1, 4}, {10, 1}, {100, 1}, {100, 4}, {500, 4}} {
		for _, engine := range []string{"jetstream-file", "jetstream-memory", "jetstream-file-fenced", "redis"} {
			b.Run(fmt.Sprintf("engine=%s/rooms=%d/msgs=%d", engine, c.rooms, c.msgs), func(b *testing.B) {
				if engine == "redis" {
					benchPersistCost(b, c.rooms, c.msgs)
				} else {
					benchHistoryWrite(b, engine, c.rooms, c.msgs)
				}
			})
		}
	}
}

func benchHistoryWrite(b *testing.B, engine string, nRooms, msgs int) {
	js, cpu := costJetStream(b)
	ctx := context.Background()
	storage := jetstream.FileStorage
	if engine == "jetstream-memory" {
		storage = jetstream.MemoryStorage
	}
	fenced := engine == "jetstream-file-fenced"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:              "HIST",
		Subjects:          []string{"scalechat.hist.>"},
		Storage:           storage,
		MaxMsgsPerSubject: historyPerRoom,
		Discard:           jetstream.DiscardOld,
	}); err != nil {
		b.Fatal(err)
	}
	subjects := make([]string, nRooms)
	runs := make([][]byte, nRooms)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("scalechat.hist.room-%05d", i)
		runs[i] = costRun(i, msgs)
	}
	last := make([]uint64, nRooms) // each room's last sequence
	futures := make([]jetstream.PubAckFuture, nRooms)
	await := func() {
		for i, f := range futures {
			select {
			case ack := <-f.Ok():
				last[i] = ack.Sequence
			case err := <-f.Err():
				b.Fatalf("room %d's write: %v", i, err)
			}
		}
	}
	round := func(fence bool) {
		for i, s := range subjects {
			var opts []jetstream.PublishOpt
			if fence {
				opts = append(opts, jetstream.WithExpectLastSequencePerSubject(last[i]))
			}
			f, err := js.PublishAsync(s, runs[i], opts...)
			if err != nil {
				b.Fatal(err)
			}
			futures[i] = f
		}
		await()
	}
	// Every room's history full: historyPerRoom writes each, in rounds
	// of up to 4,000 writes (the client's limit of pending acks).
	per := max(1, 4000/nRooms)
	for done := 0; done < historyPerRoom; done += per {
		for range min(per, historyPerRoom-done) - 1 {
			for i, s := range subjects {
				if _, err := js.PublishAsync(s, runs[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
		round(false) // its last writes: each room's last sequence
	}

	before := cpu()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		round(fenced)
	}
	b.StopTimer()
	used := cpu() - before
	if info, err := js.Stream(ctx, "HIST"); err != nil {
		b.Fatal(err)
	} else if got := info.CachedInfo().State.Msgs; got != uint64(nRooms*historyPerRoom) {
		b.Fatalf("the stream holds %d messages, not %d", got, nRooms*historyPerRoom)
	}
	reportServerCPU(b, used, map[string]int{"server-µs/room-write": b.N * nRooms, "server-µs/message": b.N * nRooms * msgs})
}

// BenchmarkKVCost is the cluster's small shared state: lease-put renews a
// node's lease (a Put on a bucket whose TTL, 3 s, ends a lease not
// renewed: nats.go v1.55's Put takes no per-key TTL, only Create does);
// lease-put-msgttl renews it with a per-message TTL of 3 s (a publish to
// the key's subject with Nats-TTL, on a bucket with LimitMarkerTTL, which
// lets keys of one bucket live different TTLs); holder-cas changes a
// room's holder by compare-and-set (KV Update with the last revision;
// on Redis a script comparing the holder, as handover.lua and
// takeover.lua do, then SET with EX). ns/op is the client's round trip;
// server-µs/op the server's CPU per operation.
func BenchmarkKVCost(b *testing.B) {
	for _, op := range []string{"lease-put", "lease-put-msgttl", "holder-cas"} {
		for _, engine := range []string{"jetstream-file", "jetstream-memory", "redis"} {
			if engine == "redis" && op == "lease-put-msgttl" {
				continue // the same SET as lease-put
			}
			b.Run(fmt.Sprintf("engine=%s/op=%s", engine, op), func(b *testing.B) {
				if engine == "redis" {
					benchKVRedis(b, op)
				} else {
					benchKVNATS(b, engine, op)
				}
			})
		}
	}
}

func benchKVNATS(b *testing.B, engine, op string) {
	js, cpu := costJetStream(b)
	ctx := context.Background()
	cfg := jetstream.KeyValueConfig{Bucket: "scalechat", History: 1, Storage: jetstream.FileStorage}
	if engine == "jetstream-memory" {
		cfg.Storage = jetstream.MemoryStorage
	}
	switch op {
	case "lease-put":
		cfg.TTL = 3 * time.Second
	case "lease-put-msgttl":
		cfg.LimitMarkerTTL = time.Second
	}
	kv, err := js.CreateKeyValue(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var do func(i int) error
	switch op {
	case "lease-put":
		do = func(i int) error {
			_, err := kv.Put(ctx, "lease.node-A", strconv.AppendInt(nil, int64(i), 10))
			return err
		}
	case "lease-put-msgttl":
		do = func(i int) error {
			_, err := js.Publish(ctx, "$KV.scalechat.lease.node-A", strconv.AppendInt(nil, int64(i), 10), jetstream.WithMsgTTL(3*time.Second))
			return err
		}
	case "holder-cas":
		rev, err := kv.Create(ctx, "holder.room-00042", []byte("node-A"))
		if err != nil {
			b.Fatal(err)
		}
		nodes := [][]byte{[]byte("node-A"), []byte("node-B")}
		do = func(i int) error {
			var err error
			rev, err = kv.Update(ctx, "holder.room-00042", nodes[(i+1)%2], rev)
			return err
		}
	}
	benchKVLoop(b, cpu, do)
}

// casHolder sets the holder KEYS[1] to ARGV[2] for ARGV[3] seconds if it
// is ARGV[1]: 1, else 0.
var casHolder = redis.NewScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1`)

func benchKVRedis(b *testing.B, op string) {
	_, rdb, cpu := costRedis(b)
	ctx := context.Background()
	var do func(i int) error
	switch op {
	case "lease-put":
		do = func(i int) error {
			return rdb.Set(ctx, "scalechat:lease:node-A", i, 3*time.Second).Err()
		}
	case "holder-cas":
		if err := rdb.Set(ctx, "scalechat:holder:room-00042", "node-A", time.Hour).Err(); err != nil {
			b.Fatal(err)
		}
		nodes := []string{"node-A", "node-B"}
		do = func(i int) error {
			ok, err := casHolder.Run(ctx, rdb, []string{"scalechat:holder:room-00042"}, nodes[i%2], nodes[(i+1)%2], 3600).Int()
			if err == nil && ok != 1 {
				err = fmt.Errorf("the holder was not %s", nodes[i%2])
			}
			return err
		}
	}
	benchKVLoop(b, cpu, do)
}

// benchKVLoop runs do b.N times, after one untimed (a script loaded, a
// connection set up), and reports the server's CPU per call.
func benchKVLoop(b *testing.B, cpu func() float64, do func(i int) error) {
	if err := do(0); err != nil {
		b.Fatal(err)
	}
	before := cpu()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := do(i + 1); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportServerCPU(b, cpu()-before, map[string]int{"server-µs/op": b.N})
}

// BenchmarkRoundCost is a whole round of a node on NATS, its payload for
// the other node and its history writes going out together on one
// connection (one flush), as a NATS engine would send them when a round
// and the history linger coincide: a payload of 20 records (rooms of 4
// split 2+2 at 1 msg/s per client, rounds of 5 ms: BenchmarkNodeChannelCost's
// shape) and one write each for 10 rooms (a 5 ms history linger:
// BenchmarkHistoryWriteCost's rooms=10/msgs=1), then it waits for the
// other node to get the payload and for every ack. Compared with the sum
// of those two benchmarks, it says what one wake-up a round instead of
// two saves.
func BenchmarkRoundCost(b *testing.B) {
	const records, nRooms = 20, 10
	srv, cpu := costNATS(b)
	errs := make(chan error, 1)
	nc := natsConn(b, srv.URL(), errs)
	sub := natsConn(b, srv.URL(), errs)
	r := &received{done: make(chan struct{}, 1)}
	if _, err := sub.Subscribe("scalechat.node.B", func(*nats.Msg) { r.got() }); err != nil {
		b.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "HIST", Subjects: []string{"scalechat.hist.>"}, Storage: jetstream.FileStorage,
		MaxMsgsPerSubject: historyPerRoom, Discard: jetstream.DiscardOld,
	}); err != nil {
		b.Fatal(err)
	}
	payload := costPayload(records)
	subjects := make([]string, nRooms)
	runs := make([][]byte, nRooms)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("scalechat.hist.room-%05d", i)
		runs[i] = costRun(i, 1)
	}
	futures := make([]jetstream.PubAckFuture, nRooms)
	watchdog := time.NewTimer(time.Minute)
	defer watchdog.Stop()
	round := func(i int) {
		r.want.Store(int64(i) + 1)
		if err := nc.Publish("scalechat.node.B", payload); err != nil {
			b.Fatal(err)
		}
		for k, s := range subjects {
			f, err := js.PublishAsync(s, runs[k])
			if err != nil {
				b.Fatal(err)
			}
			futures[k] = f
		}
		for k, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatalf("room %d's write: %v", k, err)
			}
		}
		r.wait(b, errs, watchdog)
	}
	round(0) // both connections and the stream set up
	before := cpu()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		round(i + 1)
	}
	b.StopTimer()
	reportServerCPU(b, cpu()-before, map[string]int{"server-µs/round": b.N})
}
