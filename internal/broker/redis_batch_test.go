package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// evalshaCalls is how many EVALSHA calls Redis has served, from INFO
// commandstats.
func evalshaCalls(t testing.TB, n *node) int { return commandCalls(t, n, "evalsha") }

// commandCalls is how many calls of the command Redis has served, scripts'
// included, from INFO commandstats.
func commandCalls(t testing.TB, n *node, command string) int {
	t.Helper()
	info, err := n.b.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":calls=")
		if !ok {
			continue
		}
		calls, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatal(err)
		}
		return calls
	}
	return 0
}

// BenchmarkRedisPublishSpanning is the path of a room whose members sit on
// two nodes, against a real redis-server: a message published on the
// room's owner is ordered there, sent to its follower and written behind.
// One op is one message.
func BenchmarkRedisPublishSpanning(b *testing.B) {
	rs := testsupport.StartRedis(b)
	na, nb := startNode(b, rs.URL(), 100), startNode(b, rs.URL(), 100)
	rooms := make([]string, 16)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("r%d", i)
		na.join(b, rooms[i])
		nb.join(b, rooms[i])
	}
	before := evalshaCalls(b, na)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		na.publish(rooms[i%len(rooms)], "m")
	}
	nb.hasSeqs(b, rooms, b.N)
	b.StopTimer()
	b.ReportMetric(float64(evalshaCalls(b, na)-before)/float64(b.N), "calls/msg")
}

// sameOrderOnBoth waits until both nodes have each room's first each
// messages, published by a as "ROOM-I", and checks they hold them in the
// same order, seq i+1 for message i.
func sameOrderOnBoth(t *testing.T, a, b *node, rooms []string, each int) {
	t.Helper()
	for _, r := range rooms {
		a.hasSeq(t, r, uint64(each))
		b.hasSeq(t, r, uint64(each))
		pa, pb := a.h.payloads(r), b.h.payloads(r)
		if !slices.Equal(pa, pb) || len(pa) != each {
			t.Fatalf("room %s: the nodes disagree:\n a %q\n b %q", r, pa, pb)
		}
		for i, p := range pa {
			if want := fmt.Sprintf("%d:%s-%d#", i+1, r, i); !strings.HasPrefix(p, want) {
				t.Errorf("room %s message %d is %q, want %q…", r, i, p, want)
			}
		}
	}
}

// ownRooms has the node own each room, loaded here first, with its first
// message (seq 1) ordered here and written to Redis.
func ownRooms(t testing.TB, n *node, rooms ...string) {
	t.Helper()
	for _, r := range rooms {
		n.join(t, r)
		n.publish(r, "first")
		n.h.waitFor(t, 10*time.Second, r+" to be owned", func() bool { return n.h.rooms[r].owned && n.h.rooms[r].seq == 1 })
	}
	for _, r := range rooms {
		storedSeq(t, n, r, 1)
	}
}

// persistRound queues, at once, a write of each room's messages seqs
// from..to as the owned rooms queue them (keep), room after room per seq:
// one round of the publish loop takes them all.
func persistRound(n *node, rooms []string, from, to uint64) {
	n.b.pub.mu.Lock()
	for seq := from; seq <= to; seq++ {
		for _, r := range rooms {
			payload := fmt.Sprintf(`{"room":%q,"seq":%d}`, r, seq)
			n.b.pub.persists = append(n.b.pub.persists, job{kind: jobPersist, room: r, e: Entry{Seq: seq, Payload: []byte(payload)}})
		}
	}
	n.b.pub.mu.Unlock()
	signal(n.b.pub.persistWake)
}

// storedSeq waits until the room's counter in Redis reached seq, and
// checks that its stream holds seqs 2..seq as persistRound wrote them.
func storedSeq(t testing.TB, n *node, room string, seq uint64) {
	t.Helper()
	ctx := context.Background()
	testsupport.Eventually(t, 10*time.Second, fmt.Sprintf("%s stored up to %d", room, seq), func() bool {
		got, _ := n.b.rdb.Get(ctx, n.b.seqKey(room)).Uint64()
		return got >= seq
	})
	msgs := n.stored(t, room)
	if len(msgs) > 0 && msgs[0].Seq == 1 {
		msgs = msgs[1:]
	}
	if len(msgs) != int(seq-1) {
		t.Fatalf("%s: %d messages after seq 1 in its stream, want %d", room, len(msgs), seq-1)
	}
	for i, m := range msgs {
		want := uint64(i + 2)
		if m.Seq != want || string(m.Payload) != fmt.Sprintf(`{"room":%q,"seq":%d}`, room, want) {
			t.Errorf("%s: message %d %s, want seq %d", room, m.Seq, m.Payload, want)
		}
	}
}

// The writes of a round's owned rooms go to Redis in one script call, and
// every message lands in its room's stream under its seq: a room's run of
// messages (queued between other rooms') as one entry, read back message by
// message.
func TestRedisPersistsOfARoundShareAScriptCall(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a := startNode(t, rs.URL(), 100)
	rooms := []string{"r0", "r1", "r2", "r3", "r4"}
	ownRooms(t, a, rooms...)
	before := evalshaCalls(t, a)
	xadds := commandCalls(t, a, "xadd")
	persistRound(a, rooms, 2, 4)
	for _, r := range rooms {
		storedSeq(t, a, r, 4)
	}
	if calls := evalshaCalls(t, a) - before; calls != 1 {
		t.Errorf("%d script calls for a round of %d rooms' writes, want 1", calls, len(rooms))
	}
	if n := commandCalls(t, a, "xadd") - xadds; n != len(rooms) {
		t.Errorf("%d XADDs for a round of 3 messages in each of %d rooms, want one a room", n, len(rooms))
	}
	if s := a.b.Stats(); s.Dropped != 0 || s.Owned != int64(len(rooms)) {
		t.Errorf("stats %+v: want every room still owned", s)
	}
	if n := commandCalls(t, a, "xadd") - xadds; n != len(rooms) {
		t.Errorf("%d XADDs, want one a room", n)
	}
	var tail []string
	for _, e := range a.stored(t, "r3") {
		tail = append(tail, fmt.Sprintf("%d:%s", e.Seq, e.Payload))
	}
	if got, want := strings.Join(tail, " "), `2:{"room":"r3","seq":2} 3:{"room":"r3","seq":3} 4:{"room":"r3","seq":4}`; !strings.HasSuffix(got, want) || !strings.HasPrefix(got, "1:") {
		t.Errorf("r3's stream reads back %s, want seq 1 then %s", got, want)
	}
}

// The writes of an owned room renew its keys' TTLs once per renewInterval,
// not with every call, and leave them their TTL when they do not.
func TestRedisPersistRenewsTTLsOncePerInterval(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a := startNode(t, rs.URL(), 100)
	ownRooms(t, a, "r") // its first write renewed the keys
	ctx := context.Background()
	for _, key := range []string{a.b.seqKey("r"), a.b.roomNodesKey("r")} {
		if err := a.b.rdb.Expire(ctx, key, 100*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ttls := func(what string, lo, hi time.Duration) {
		t.Helper()
		for _, key := range []string{a.b.seqKey("r"), a.b.roomNodesKey("r")} {
			if got := a.b.rdb.TTL(ctx, key).Val(); got < lo || got > hi {
				t.Errorf("%s: %s's TTL is %v, want %v to %v", what, key, got, lo, hi)
			}
		}
	}
	expires := commandCalls(t, a, "expire")
	for seq := uint64(2); seq <= 4; seq++ { // three rounds within the interval
		persistRound(a, []string{"r"}, seq, seq)
		storedSeq(t, a, "r", seq)
	}
	ttls("writes within the interval", time.Second, 100*time.Second)
	a.renewalDue("r")
	for seq := uint64(5); seq <= 6; seq++ {
		persistRound(a, []string{"r"}, seq, seq)
		storedSeq(t, a, "r", seq)
	}
	ttls("writes after the interval", time.Hour, time.Hour+renewInterval(time.Hour))
	if n := commandCalls(t, a, "expire") - expires; n != 5 {
		t.Errorf("five rounds of writes ran %d EXPIREs, want 5: one renewal of the room's five keys", n)
	}
}

// A room another node took over between two rounds is reported lost and
// dropped here, while the other rooms of the same script call are stored.
func TestRedisPersistCallReportsATakenRoomAlone(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a := startNode(t, rs.URL(), 100)
	rooms := []string{"r0", "r1", "r2"}
	ownRooms(t, a, rooms...)
	a.takenOver(t, "r1")
	before := evalshaCalls(t, a)
	persistRound(a, rooms, 2, 3)
	a.h.waitFor(t, 10*time.Second, "r1 to be dropped", func() bool { return a.h.rooms["r1"] == nil })
	storedSeq(t, a, "r0", 3)
	storedSeq(t, a, "r2", 3)
	if n := len(a.stored(t, "r1")); n != 1 {
		t.Errorf("r1's stream has %d messages, want its first alone", n)
	}
	if calls := evalshaCalls(t, a) - before; calls != 1 {
		t.Errorf("%d script calls, want the round's one", calls)
	}
	testsupport.Eventually(t, 5*time.Second, "the drop counted", func() bool {
		s := a.b.Stats()
		return s.Dropped == 1 && s.Owned == 2
	})
}

// A round of writes after Redis forgot the scripts (a restart) runs the
// persist call again with the script: every room's messages land.
func TestRedisPersistCallRerunsAfterNOSCRIPT(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a := startNode(t, rs.URL(), 100)
	rooms := []string{"r0", "r1"}
	ownRooms(t, a, rooms...)
	if err := a.b.rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	persistRound(a, rooms, 2, 3)
	for _, r := range rooms {
		storedSeq(t, a, r, 3)
	}
	if s := a.b.Stats(); s.Errors != 0 || s.Dropped != 0 {
		t.Errorf("stats %+v: the call failed", s)
	}
}

// plan batches the writes of owned rooms across rooms, yet never moves a
// room's job past another of the same room: a write after a release of
// its room waits for a later call, and the call cap holds.
func TestPlanKeepsEachRoomsOrder(t *testing.T) {
	b, err := NewRedis(Config{URL: "redis://127.0.0.1:1", History: 10, TTL: time.Hour}, newFakeRooms())
	if err != nil {
		t.Fatal(err)
	}
	persist := func(room string) job { return job{kind: jobPersist, room: room} }
	release := func(room string) job { return job{kind: jobRelease, room: room} }
	for _, c := range []struct {
		name  string
		batch []job
		want  [][]int
	}{
		{"rooms share a call", []job{persist("x"), persist("y"), persist("x")}, [][]int{{0, 1, 2}}},
		{"past another room's release", []job{persist("x"), release("y"), persist("z")}, [][]int{{0, 2}, {1}}},
		{"not past its room's release", []job{persist("x"), release("x"), persist("x"), persist("y")}, [][]int{{0}, {1}, {2, 3}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := b.plan(c.batch, make([]string, len(c.batch)), make([]RoomConfig, len(c.batch)))
			var got [][]int
			for _, cl := range calls {
				got = append(got, cl.js)
			}
			if !slices.EqualFunc(got, c.want, slices.Equal) {
				t.Errorf("calls %v, want %v", got, c.want)
			}
		})
	}
	batch := make([]job, maxPersistBatch+1)
	for i := range batch {
		batch[i] = persist(fmt.Sprint("r", i))
	}
	if calls := b.plan(batch, make([]string, len(batch)), make([]RoomConfig, len(batch))); len(calls) != 2 || len(calls[0].js) != maxPersistBatch {
		t.Errorf("%d writes made %d calls, want 2, the first of %d", len(batch), len(calls), maxPersistBatch)
	}
}

// On a Redis Cluster the writes of owned rooms are batched per hash slot:
// a call never crosses slots, and every room's messages land.
func TestRedisClusterBatchesPersistsPerSlot(t *testing.T) {
	rc := testsupport.StartRedisCluster(t, 3, 0)
	a := startNode(t, rc.URL(), 100)
	rooms := []string{"r0", "r1", "r2", "r3", "r4", "r5"}
	ownRooms(t, a, rooms...)
	persistRound(a, rooms, 2, 3)
	for _, r := range rooms {
		storedSeq(t, a, r, 3)
	}
	if s := a.b.Stats(); s.Errors != 0 || s.Dropped != 0 {
		t.Errorf("stats %+v: a call crossed slots?", s)
	}
}

// Without history the writes of an owned room raise its counter alone: no
// stream, and no message sent to the script.
func TestRedisPersistWithoutHistoryRaisesTheCounter(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a := startNode(t, rs.URL(), 0)
	ownRooms(t, a, "r")
	persistRound(a, []string{"r"}, 2, 3)
	ctx := context.Background()
	testsupport.Eventually(t, 10*time.Second, "r's counter at 3", func() bool {
		n, _ := a.b.rdb.Get(ctx, a.b.seqKey("r")).Uint64()
		return n == 3
	})
	if n := a.b.rdb.Exists(ctx, a.b.historyKey("r")).Val(); n != 0 {
		t.Errorf("a room without history has a stream in Redis")
	}
}
