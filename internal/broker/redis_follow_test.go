package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// startOwnerNodes starts two brokers with owner order on one Redis: the
// first loads the rooms first and owns them, the second follows.
func startOwnerNodes(t testing.TB, rooms []string) (owner, follower *node) {
	t.Helper()
	rs := testsupport.StartRedis(t)
	cfg := Config{URL: rs.URL(), History: 100, TTL: time.Hour}
	owner, follower = startNodeConfig(t, cfg), startNodeConfig(t, cfg)
	for _, r := range rooms {
		owner.join(t, r)
		owner.waitHeld(t, r)
		follower.join(t, r)
	}
	return owner, follower
}

// TestRedisOwnerOrdersWhatItsFollowersSend: a follower's publishes go to
// the owner, which orders them with its own; both nodes get every message
// once, in one order, and the follower's senders get their seq (Done). No
// publish script runs: Redis only carries the records.
func TestRedisOwnerOrdersWhatItsFollowersSend(t *testing.T) {
	owner, follower := startOwnerNodes(t, []string{"r"})
	scripts := evalshaCalls(t, owner)
	const each = 20
	acked := make(chan uint64, each)
	for i := range each {
		owner.publish("r", fmt.Sprintf("o%d", i))
		follower.h.publishTo(follower.b, Publication{Room: "r", Prefix: []byte(fmt.Sprintf("f%d#", i)), From: 3}, acked)
	}
	owner.hasSeq(t, "r", 2*each)
	follower.hasSeq(t, "r", 2*each)
	po, pf := owner.h.payloads("r"), follower.h.payloads("r")
	if !slices.Equal(po, pf) || len(po) != 2*each {
		t.Fatalf("the nodes disagree:\n owner    %q\n follower %q", po, pf)
	}
	next := map[byte]int{} // each sender's messages in the order sent
	for i, p := range po {
		_, text, _ := strings.Cut(p, ":")
		if want := fmt.Sprintf("%c%d#%d", text[0], next[text[0]], i+1); text != want {
			t.Errorf("seq %d is %q, want %q", i+1, text, want)
		}
		next[text[0]]++
	}
	for range each {
		if seq := answerOf(t, acked, "a forwarded publish"); seq == 0 || seq > 2*each {
			t.Errorf("a forwarded publish answered seq %d", seq)
		}
	}
	// Only the writes behind may run a script (persist.lua, at most one a
	// round of 5 ms): never one a message.
	if n := evalshaCalls(t, owner) - scripts; n > each {
		t.Errorf("%d script calls for %d messages", n, 2*each)
	}
}

// TestRedisOwnerStoppingHandsOverWhatFollowersSend: an owner stopped (a
// node drained) while its follower forwards publishes hands the room over
// to the follower, and every publish is ordered once, by one owner or the
// other: none refused, the room never dropped. The owner used to stop
// listening first: the follower's forwards reached nobody, and it dropped
// the room (its members closed with 1012) or refused them.
func TestRedisOwnerStoppingHandsOverWhatFollowersSend(t *testing.T) {
	rs := testsupport.StartRedis(t)
	cfg := Config{URL: rs.URL(), History: 1000, TTL: time.Hour}
	owner, stop := startStoppable(t, cfg)
	follower := startNodeConfig(t, cfg)
	owner.join(t, "r")
	owner.waitHeld(t, "r")
	follower.join(t, "r")
	const total, stopAt = 300, 100
	acked := make(chan uint64, total)
	for i := range total {
		if i == stopAt {
			go stop()
		}
		follower.h.publishTo(follower.b, Publication{Room: "r", Prefix: []byte(fmt.Sprintf("f%d#", i)), From: 3}, acked)
		time.Sleep(time.Millisecond) // paces the sends over the owner's stop; nothing waits on it
	}
	seqs := map[uint64]bool{}
	for range total {
		seq := answerOf(t, acked, "a forwarded publish")
		if seq == 0 || seqs[seq] {
			t.Fatalf("a forwarded publish answered seq %d (0: refused; or twice)", seq)
		}
		seqs[seq] = true
	}
	follower.hasSeq(t, "r", total)
	if s := follower.b.Stats(); s.Dropped != 0 || s.Refused != 0 {
		t.Errorf("follower: %+v, want nothing dropped or refused", s)
	}
	if p := follower.h.payloads("r"); len(p) != total {
		t.Errorf("the follower holds %d messages, want %d", len(p), total)
	}
}

// BenchmarkRedisOwnerForward is the follower's side of a message of a room
// owned by another node: forwarded, ordered there, and back in a batch.
func BenchmarkRedisOwnerForward(b *testing.B) {
	rooms := make([]string, 16)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("r%d", i)
	}
	owner, follower := startOwnerNodes(b, rooms)
	publishes := commandCalls(b, owner, "publish")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		follower.publish(rooms[i%len(rooms)], "m")
	}
	follower.hasSeqs(b, rooms, b.N)
	b.StopTimer()
	b.ReportMetric(float64(commandCalls(b, owner, "publish")-publishes)/float64(b.N), "publish/msg")
}

// BenchmarkFollowRecords is a round's records for a node: a message as
// keep queues it, encoded into the round's payload, and the payload split
// on the other side.
func BenchmarkFollowRecords(b *testing.B) {
	json := []byte(`{"type":"message","room":"room-1234","seq":12345,"sender":"alice","text":"` + string(make([]byte, 200)) + `"}`)
	var recs []followRec
	b.ReportAllocs()
	for i := range b.N {
		payload := sendPayload([]job{{kind: jobSend, room: "room-1234", e: Entry{Seq: uint64(i), Payload: json}}}, []int{0}, int64(i))
		var err error
		recs, err = splitFollow(string(payload[1:]), recs[:0])
		if err != nil || len(recs) != 2 { // the round's time, the message
			b.Fatal(err)
		}
	}
}

// TestRedisOwnerOrderCatchUpKeepsTheStream: after an outage (a Redis Cluster
// failover) both nodes check the room against Redis. Redis's counter lags
// the owner's history, written behind, as a failover that lost the last
// writes leaves it: with the owner order only the epoch tells whether the
// stream is Redis's, and neither node starts the room anew.
func TestRedisOwnerOrderCatchUpKeepsTheStream(t *testing.T) {
	owner, follower := startOwnerNodes(t, []string{"r"})
	for i := range 5 {
		owner.publish("r", fmt.Sprint(i))
	}
	follower.hasSeq(t, "r", 5)
	ctx := t.Context()
	testsupport.Eventually(t, 10*time.Second, "the writes behind", func() bool {
		n, _ := owner.b.rdb.Get(ctx, owner.b.seqKey("r")).Int()
		return n == 5
	})
	epoch := owner.h.Epoch("r")
	if err := owner.b.rdb.Set(ctx, owner.b.seqKey("r"), 3, time.Hour).Err(); err != nil { // the last two writes lost
		t.Fatal(err)
	}
	for _, n := range []*node{owner, follower} {
		n.b.catchUp(ctx, "r")
		if e := n.h.Epoch("r"); e != epoch {
			t.Fatalf("the room started anew (epoch %q, was %q)", e, epoch)
		}
	}
	if e, _ := owner.b.rdb.Get(ctx, owner.b.epochKey("r")).Result(); e != epoch {
		t.Errorf("Redis's epoch is %q, want the stream's %q", e, epoch)
	}
	owner.publish("r", "after")
	follower.hasSeq(t, "r", 6)
}

// TestRedisOwnerThatDropsARoomTellsItsFollowers: the room's keys went from
// Redis (flushed, evicted) while both nodes have it, so the owner's next
// write is refused and it drops the room. Its follower drops it too (its
// members resume into the room loaded anew): it used to go on following an
// owner that ordered nothing, until some node loaded the room again.
func TestRedisOwnerThatDropsARoomTellsItsFollowers(t *testing.T) {
	owner, follower := startOwnerNodes(t, []string{"r"})
	owner.publish("r", "before")
	follower.hasSeq(t, "r", 1)
	ctx := t.Context()
	if err := owner.b.rdb.Del(ctx, owner.b.publishKeys("r")...).Err(); err != nil {
		t.Fatal(err)
	}
	owner.publish("r", "after")
	owner.h.waitFor(t, 10*time.Second, "the owner to drop r", func() bool { r := owner.h.rooms["r"]; return r == nil || r.dropped })
	follower.h.waitFor(t, 10*time.Second, "the follower to drop r", func() bool { r := follower.h.rooms["r"]; return r == nil || r.dropped })
}

// startProxiedOwner starts, on one redis-server, an owner of room "r" that
// reaches Redis through a proxy (to cut it off) and a follower of the room
// that reaches it directly, both of cfg with its URL set.
func startProxiedOwner(t *testing.T, cfg Config) (rs *testsupport.Redis, px *testsupport.Proxy, owner, follower *node) {
	t.Helper()
	rs = testsupport.StartRedis(t)
	px = testsupport.NewProxy(t, rs.Addr())
	cfg.URL = "redis://" + px.Addr() + "/0"
	owner = startNodeConfig(t, cfg)
	cfg.URL = rs.URL()
	follower = startNodeConfig(t, cfg)
	owner.join(t, "r")
	owner.waitHeld(t, "r")
	follower.join(t, "r")
	return rs, px, owner, follower
}

// TestRedisOutagePastTheLeaseKeepsFollowedRooms: Redis answers nobody for
// longer than a node's lease (a slow failover), so every lease in it runs
// out, and the owner gets back a moment after its follower. The follower
// must not take the owner for dead (it could not renew either): its
// followed room used to be dropped, its members closed (1012), though the
// owner was alive.
func TestRedisOutagePastTheLeaseKeepsFollowedRooms(t *testing.T) {
	rs, px, owner, follower := startProxiedOwner(t, Config{History: 100, TTL: time.Hour})
	owner.b.Presence("r", "u", 1) // the follower follows the owner's presence, so checks its lease
	owner.publish("r", "before")
	follower.hasSeq(t, "r", 1)
	testsupport.Eventually(t, 10*time.Second, "the owner's presence seen", func() bool { return len(follower.b.sub.presencePeers()) == 1 })

	rs.Pause()
	px.Refuse(true) // the owner gets back later than the follower
	px.Drop()
	time.Sleep(nodeLease + 500*time.Millisecond) // the fault itself: every lease runs out
	rs.Resume()
	resumed := time.Now()
	// The follower's lease renewed: it is back, and would have checked the
	// owner's lease (gone) at once.
	testsupport.Eventually(t, 20*time.Second, "the follower's lease renewed", func() bool {
		return time.Unix(0, follower.b.lease.until.Load()).After(resumed.Add(nodeLease - leaseMargin))
	})
	if s := follower.b.Stats(); s.Dropped != 0 {
		t.Fatalf("the follower dropped %d rooms after the outage: %+v", s.Dropped, s)
	}
	px.Refuse(false)
	testsupport.Eventually(t, 20*time.Second, "the owner back", func() bool { return owner.b.Stats().InStep })
	owner.publish("r", "after")
	follower.hasSeq(t, "r", 2)
	// Past the lease of grace, the follower checks its peers: the owner's
	// lease is renewed by then.
	testsupport.Eventually(t, 20*time.Second, "the follower's peers checked", func() bool {
		return time.Unix(0, follower.b.lease.until.Load()).After(resumed.Add(2*nodeLease + nodeLease/3))
	})
	if s := follower.b.Stats(); s.Dropped != 0 {
		t.Fatalf("the follower dropped %d rooms once the owner was back: %+v", s.Dropped, s)
	}
}

// TestRedisOwnerRefusesFollowedRoomsWhileRedisIsAway: while Redis is away
// an owner goes on ordering the rooms only it has, and refuses the rooms
// other nodes follow, as the Redis order refuses shared rooms: their
// messages would reach its own members alone, a sender alone there no one
// (the audit once counted such a send as lost under a Redis restart).
func TestRedisOwnerRefusesFollowedRoomsWhileRedisIsAway(t *testing.T) {
	rs := testsupport.StartRedis(t)
	cfg := Config{URL: rs.URL(), History: 100, TTL: time.Hour}
	owner, follower := startNodeConfig(t, cfg), startNodeConfig(t, cfg)
	for _, r := range []string{"shared", "solo"} {
		owner.join(t, r)
		owner.waitHeld(t, r)
	}
	follower.join(t, "shared")
	owner.publish("shared", "before")
	follower.hasSeq(t, "shared", 1)
	rs.Stop()
	testsupport.Eventually(t, 10*time.Second, "the owner to see Redis gone", func() bool { return !owner.b.Stats().InStep })
	if _, err := owner.b.Publish(Publication{Room: "shared", Prefix: []byte("during#"), From: 3}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a followed room's publish while Redis is away: %v, want ErrUnavailable", err)
	}
	if _, err := owner.b.Publish(Publication{Room: "solo", Prefix: []byte("during#"), From: 3}); err != nil {
		t.Errorf("a room owned alone refused while Redis is away: %v", err)
	}
}

// TestRedisNoScriptOrdersAMessage: no message is ordered by a script in
// Redis: not an owner's, not a follower's, not one sent as its room loads
// (a POST opens its room and publishes at once), which once went through
// publish.lua. The only script a message runs is persist.lua, which
// writes a round's messages behind.
func TestRedisNoScriptOrdersAMessage(t *testing.T) {
	rs := testsupport.StartRedis(t)
	cfg := Config{URL: rs.URL(), History: 100, TTL: time.Hour}
	owner, follower := startNodeConfig(t, cfg), startNodeConfig(t, cfg)
	owner.join(t, "r")
	owner.waitHeld(t, "r")
	follower.join(t, "r")
	runs := scriptRuns(t, rs.Addr(), persistScript)
	owner.publish("r", "o")
	follower.publish("r", "f")
	got := make(chan uint64, 1)
	follower.h.open("s")
	follower.b.Subscribe("s")
	follower.h.publishTo(follower.b, Publication{Room: "s", Prefix: []byte("early#"), From: -1}, got)
	if seq := answerOf(t, got, "the publish sent as its room loaded"); seq != 1 {
		t.Errorf("the publish sent as its room loaded got seq %d, want 1", seq)
	}
	owner.hasSeq(t, "r", 2)
	follower.hasSeq(t, "r", 2)
	if n, seen := runs(); seen == 0 {
		t.Error("MONITOR saw no command: the count of script runs means nothing")
	} else if n != 0 {
		t.Errorf("%d script runs besides persist.lua's while three messages were ordered", n)
	}
}

// scriptRuns watches Redis at addr (MONITOR, on a connection of its own
// read line by line: go-redis's Monitor races inside the library) from now
// until the test ends, and returns how many script calls (EVAL, EVALSHA)
// but those of except it has served so far, and how many commands it saw
// in all.
func scriptRuns(t *testing.T, addr string, except *redis.Script) func() (runs, seen int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK") {
		t.Fatalf("MONITOR answered %q, %v", l, err)
	}
	var n, all atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return // closed at the test's end
			}
			all.Add(1)
			lower := strings.ToLower(l)
			if (strings.Contains(lower, `"evalsha"`) || strings.Contains(lower, `"eval"`)) && !strings.Contains(l, except.Hash()) {
				n.Add(1)
			}
		}
	}()
	t.Cleanup(func() { _ = conn.Close(); <-done })
	return func() (int, int) { return int(n.Load()), int(all.Load()) }
}

// TestRedisOwnerGoneRefusesBeforeItDrops: when a followed room's owner is
// found gone (its lease ended) or unheard (a PUBLISH to it reached nobody),
// the publishes forwarded to it are refused before the room is dropped: a
// refusal reaches its sender while its connection is up. The drop came
// first, closing the members (1012), and senders of the last second were
// never told: the audit counted lost sends (1 run in 5 of a node stopped
// past its lease, helper-11's report; unheard, the same order, by reading).
func TestRedisOwnerGoneRefusesBeforeItDrops(t *testing.T) {
	rs := testsupport.StartRedis(t)
	for _, c := range []struct {
		name string
		gone func(b *Redis, node string)
	}{
		{"lease ended", func(b *Redis, node string) { b.ownerGone(node, "its lease ended") }},
		{"unheard, its mark back", (*Redis).leftUnheard},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := startNodeConfig(t, Config{URL: rs.URL(), History: 100, TTL: time.Hour})
			n.h.open("r")
			n.b.own.setOwner("r", "gone")
			n.b.own.addPending(forward{p: Publication{Room: "r", Prefix: []byte("x#")}, owner: "gone", sent: time.Now(), tries: 1, ticket: n.b.own.sendOut("r")})
			c.gone(n.b, "gone")
			n.h.mu.Lock()
			defer n.h.mu.Unlock()
			refused, dropped := slices.IndexFunc(n.h.calls, func(c string) bool { return strings.HasPrefix(c, "refused r x#") }),
				slices.Index(n.h.calls, "drop r")
			if refused < 0 || dropped < 0 || refused > dropped {
				t.Errorf("calls %q: want the forward refused, then the room dropped", n.h.calls)
			}
		})
	}
}

// TestRedisUnheardSettlesAfterWhatCameBefore: what a node found unheard
// sent this one before it stopped listening (here, its answer to a
// forwarded publish) is read before what it left is settled: the forward
// gets its seq, not a refusal. This node's subscription is held (fillMu,
// behind a message) so that the answer is still unread when the round
// finds the node unheard, as it can be when a stopping owner answers and
// then unsubscribes; settled at once, the forward was refused.
func TestRedisUnheardSettlesAfterWhatCameBefore(t *testing.T) {
	rs := testsupport.StartRedis(t)
	n := startNodeConfig(t, Config{URL: rs.URL(), History: 100, TTL: time.Hour})
	testsupport.Eventually(t, 10*time.Second, "the node in step with Redis", func() bool { return n.b.Stats().InStep })
	n.h.open("r")
	n.b.own.setOwner("r", "gone")
	acked := make(chan uint64, 1)
	n.h.mu.Lock()
	n.h.nextID++
	id := n.h.nextID
	n.h.waiters[id] = acked
	n.h.mu.Unlock()
	req := n.b.own.addPending(forward{p: Publication{Room: "r", Prefix: []byte("x#"), ID: id}, owner: "gone",
		sent: time.Now(), tries: 1, ticket: n.b.own.sendOut("r")})

	n.b.fillMu.Lock() // the subscription stops at the message, before the answer
	payload := appendMessage([]byte{followMark}, "elsewhere", 1, []byte(`{}`))
	payload = append(payload, encAck(req, 7)...)
	if got, err := n.b.rdb.Publish(context.Background(), n.b.nodeChannel(), payload).Result(); err != nil || got != 1 {
		n.b.fillMu.Unlock()
		t.Fatalf("the answer reached %d subscribers (%v), want the node", got, err)
	}
	n.b.sendTo("gone", encNotOwner("q")) // reaches nobody: the node is found unheard
	testsupport.Eventually(t, 5*time.Second, "the node found unheard", func() bool {
		n.b.own.mu.Lock()
		marked := len(n.b.own.marks) > 0
		n.b.own.mu.Unlock()
		return marked || n.b.Stats().Refused > 0
	})
	n.b.fillMu.Unlock()
	if seq := answerOf(t, acked, "the forward"); seq != 7 {
		t.Errorf("the forward answered before the node was found unheard got seq %d, want 7", seq)
	}
}
