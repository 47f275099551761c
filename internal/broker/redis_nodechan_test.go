package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// spy subscribes a plain client to channels and collects what comes.
type spy struct {
	mu   sync.Mutex
	msgs []*redis.Message
}

func startSpy(t *testing.T, url string, channels ...string) *spy {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	ctx, cancel := context.WithCancel(context.Background())
	ps := c.Subscribe(ctx, channels...)
	if _, err := ps.Receive(ctx); err != nil { // the first confirmation
		t.Fatal(err)
	}
	for range len(channels) - 1 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s := &spy{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ps.Channel() {
			s.mu.Lock()
			s.msgs = append(s.msgs, m)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); _ = ps.Close(); <-done; _ = c.Close() })
	return s
}

func (s *spy) got() []*redis.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// A round's messages of several rooms an owner orders reach its follower in
// one PUBLISH on the follower's channel (M records), split back into every
// room's messages in order; the rooms' channels carry no chat message.
func TestRedisNodeBatchCarriesSeveralRooms(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a, b := startNode(t, rs.URL(), 100), startNode(t, rs.URL(), 100)
	rooms := []string{"r0", "r1", "r2", "r3"}
	channels := []string{b.b.nodeChannel()}
	for _, r := range rooms {
		a.join(t, r)
		b.join(t, r)
		channels = append(channels, b.b.channel(r))
	}
	s := startSpy(t, rs.URL(), channels...)
	const each = 5
	for i := range each {
		for _, r := range rooms {
			a.publish(r, fmt.Sprintf("%s-%d", r, i))
		}
	}
	sameOrderOnBoth(t, a, b, rooms, each)
	// The spy may see the last batch after b did: wait for all 20 records.
	var batches, records, mixed int
	deadline := time.Now().Add(5 * time.Second)
	for records < each*len(rooms) && time.Now().Before(deadline) {
		batches, records, mixed = 0, 0, 0
		for _, m := range s.got() {
			if m.Channel != b.b.nodeChannel() {
				if m.Payload != "" && m.Payload[0] >= '0' && m.Payload[0] <= '9' { // "seq json"
					t.Fatalf("a chat message on room channel %s: %q", m.Channel, m.Payload)
				}
				continue
			}
			rest, ok := strings.CutPrefix(m.Payload, string(followMark))
			if !ok {
				t.Fatalf("a payload on b's channel without the owner protocol's mark: %q", m.Payload)
			}
			recs, err := splitFollow(rest, nil)
			if err != nil {
				t.Fatalf("batch %q: %v", m.Payload, err)
			}
			seen := map[string]bool{}
			for _, r := range recs {
				if r.kind == recMessage {
					seen[r.room] = true
					records++
				}
			}
			if len(seen) > 0 {
				batches++
			}
			if len(seen) > 1 {
				mixed++
			}
		}
		time.Sleep(10 * time.Millisecond) // polling the spy: it has no signal of its own
	}
	if records != each*len(rooms) {
		t.Fatalf("%d records in %d batches on b's channel, want %d", records, batches, each*len(rooms))
	}
	// 20 messages queued at once go out in a round or two.
	if batches > 4 || mixed == 0 {
		t.Errorf("%d batches (%d with several rooms) for %d messages queued at once: not batched per node", batches, mixed, records)
	}
	if st := b.b.Stats(); st.Received != uint64(each*len(rooms)) || st.Errors != 0 {
		t.Errorf("b's stats %+v: want %d received, no error", st, each*len(rooms))
	}
}

// A node that loads a room while another publishes to it gets every message
// from the one after its history tail on, exactly once and in order.
func TestRedisNodeJoinsRoomMidStream(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a, c, b := startNode(t, rs.URL(), 1000), startNode(t, rs.URL(), 1000), startNode(t, rs.URL(), 1000)
	a.join(t, "r")
	c.join(t, "r") // on two nodes: a owns the room, c follows it
	const total = 300
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range total {
			a.publish("r", fmt.Sprintf("m%d", i))
			if i%10 == 0 {
				time.Sleep(time.Millisecond) // spread over several rounds
			}
		}
	}()
	a.hasSeq(t, "r", total/3)
	b.join(t, "r") // mid-stream
	<-sent
	for _, n := range []*node{a, b, c} {
		n.hasSeq(t, "r", total)
	}
	b.h.mu.Lock()
	room := b.h.rooms["r"]
	var got []string
	for _, e := range append(slices.Clone(room.tail), room.msgs...) {
		got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Payload))
	}
	b.h.mu.Unlock()
	want := a.h.payloads("r")
	if len(got) == 0 || len(got) > len(want) || !slices.Equal(got, want[len(want)-len(got):]) {
		t.Fatalf("b (tail and deliveries) is not a's last %d messages:\n b %q\n a %q", len(got), got, want)
	}
	if first := got[0]; first != want[0] && room.tail == nil {
		t.Errorf("b loaded no tail and starts at %q", first)
	}
}

// A node whose peers took it out of a room's set (its lease lapsed: a
// SIGSTOP) is put back in by rejoin, at its next lease renewal; a follower
// still gets every message from the room's owner, once.
func TestRedisRejoinAfterALapsedLease(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a, b := startNode(t, rs.URL(), 100), startNode(t, rs.URL(), 100)
	for _, n := range []*node{a, b} {
		n.join(t, "r")
	}
	ctx := context.Background()
	nodes := a.b.roomNodesKey("r")
	if err := a.b.rdb.SRem(ctx, nodes, b.b.id).Err(); err != nil { // as checkPeers does
		t.Fatal(err)
	}
	a.publish("r", "m1")
	a.publish("r", "m2")
	b.hasSeq(t, "r", 2)
	if !b.b.rejoin(ctx) {
		t.Fatal("rejoin: Redis did not answer")
	}
	if in, err := a.b.rdb.SIsMember(ctx, nodes, b.b.id).Result(); err != nil || !in {
		t.Fatalf("b back in the room's set: %v, %v", in, err)
	}
	a.publish("r", "m3")
	for _, n := range []*node{a, b} {
		n.hasSeq(t, "r", 3)
	}
	if pa, pb := a.h.payloads("r"), b.h.payloads("r"); !slices.Equal(pa, pb) {
		t.Fatalf("b %q, want a's %q", pb, pa)
	}
	if st := b.b.Stats(); st.Gaps != 0 || st.Received != 3 {
		t.Errorf("b's stats %+v: want the three messages received from a, none filled from the stream", st)
	}
}

// A room's set of nodes never expires before its counter: were it gone
// with the counter alive, the room's messages would be sent to no node.
func TestRedisRoomSetOutlivesItsCounter(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a, b := startNode(t, rs.URL(), 100), startNode(t, rs.URL(), 100)
	a.join(t, "r")
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		seq, err := a.b.rdb.TTL(ctx, a.b.seqKey("r")).Result()
		if err != nil {
			t.Fatal(err)
		}
		set, err := a.b.rdb.TTL(ctx, a.b.roomNodesKey("r")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if set <= 0 || set < seq {
			t.Errorf("%s: the set of nodes expires in %v, the counter in %v", when, set, seq)
		}
	}
	b.join(t, "r")
	a.publish("r", "m1") // renews the keys to the TTL and a quarter
	b.hasSeq(t, "r", 1)
	check("after a publish")
	c := startNode(t, rs.URL(), 100)
	c.join(t, "r") // a load sets the set's TTL alone
	check("after another node loaded the room")
	if !c.b.rejoin(ctx) {
		t.Fatal("rejoin: Redis did not answer")
	}
	check("after a rejoin")
}
