package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestFillScript: fill.lua writes what a follower held beyond the room's
// stream, continuing it: from its last entry's seq + 1, consecutive, up to
// the first message the follower lacks; nothing for another epoch, and
// nothing the stream has.
func TestFillScript(t *testing.T) {
	rs := testsupport.StartRedis(t)
	n := startNode(t, rs.URL(), 100)
	ctx := context.Background()
	if err := fillScript.Load(ctx, n.b.rdb).Err(); err != nil {
		t.Fatal(err)
	}
	held := func(seqs ...uint64) []Entry {
		var es []Entry
		for _, s := range seqs {
			es = append(es, Entry{Seq: s, Payload: fmt.Appendf(nil, "m%d", s)})
		}
		return es
	}
	for _, tc := range []struct {
		name    string
		epoch   string
		held    []Entry
		written int64
		stream  string // the stream's messages after, as show writes them
		counter uint64
	}{
		{"continues the stream", "e1", held(2, 3, 4, 5), 3, "1:m1 2:m2 3:m3 4:m4 5:m5", 5},
		{"stops where the follower lacks one", "e1", held(3, 4, 6, 7), 2, "1:m1 2:m2 3:m3 4:m4", 4},
		{"nothing when the next one is lacking", "e1", held(4, 5), 0, "1:m1 2:m2", 2},
		{"nothing of another epoch", "e2", held(3, 4), 0, "1:m1 2:m2", 2},
		{"nothing the stream has", "e1", held(1, 2), 0, "1:m1 2:m2", 2},
		{"an empty stream from its counter", "e1", held(3, 4), 2, "3:m3 4:m4", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room := "fill-" + tc.name
			if err := n.b.rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for s := uint64(1); s <= 2 && tc.name != "an empty stream from its counter"; s++ {
				n.b.rdb.XAdd(ctx, &redis.XAddArgs{Stream: n.b.historyKey(room), ID: fmt.Sprintf("%d-1", s), Values: []any{"m", fmt.Sprintf("m%d", s)}})
			}
			n.b.rdb.Set(ctx, n.b.seqKey(room), 2, time.Hour)
			n.b.rdb.Set(ctx, n.b.epochKey(room), "e1", time.Hour)
			var cmd redis.Cmder
			if _, err := n.b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				cmd = n.b.fillCmd(ctx, p, job{kind: jobFill, room: room, fill: &fillJob{epoch: tc.epoch, tail: tc.held}})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if got, err := cmd.(*redis.Cmd).Int64(); err != nil || got != tc.written {
				t.Errorf("fill.lua wrote %d (%v), want %d", got, err, tc.written)
			}
			if got := show(n.stored(t, room)); got != tc.stream {
				t.Errorf("stream %s, want %s", got, tc.stream)
			}
			if got, _ := n.b.rdb.Get(ctx, n.b.seqKey(room)).Uint64(); got != tc.counter {
				t.Errorf("counter %d, want %d", got, tc.counter)
			}
		})
	}
}

// TestPersistAfterAFill: an owner that was taken for gone, and whose
// follower wrote messages 2 and 3 (fill.lua), writes its run of 2..4 and
// its message 3 alone without failing its call: the run whose last
// message the stream has is skipped, the other written whole, and the
// stream read gives each message once. persist.lua's XADD used to fail the
// whole call (every room in it) on an id at or below the stream's last.
func TestPersistAfterAFill(t *testing.T) {
	rs := testsupport.StartRedis(t)
	n := startNode(t, rs.URL(), 100)
	ownRooms(t, n, "a", "b") // seq 1 each, through Redis
	ctx := context.Background()
	for _, room := range []string{"a", "b"} {
		epoch, _ := n.b.rdb.Get(ctx, n.b.epochKey(room)).Result()
		fill := []Entry{{Seq: 2, Payload: []byte(room + "2")}, {Seq: 3, Payload: []byte(room + "3")}}
		if _, err := n.b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			n.b.fillCmd(ctx, p, job{kind: jobFill, room: room, fill: &fillJob{epoch: epoch, tail: fill}})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// a: its run of 2..4 (begins below the stream's last, ends past it);
	// b: message 3 alone (the stream has it).
	batch := []job{
		{kind: jobPersist, room: "a", e: Entry{Seq: 2, Payload: []byte("a2")}},
		{kind: jobPersist, room: "a", e: Entry{Seq: 3, Payload: []byte("a3")}},
		{kind: jobPersist, room: "a", e: Entry{Seq: 4, Payload: []byte("a4")}},
		{kind: jobPersist, room: "b", e: Entry{Seq: 3, Payload: []byte("b3")}},
	}
	c := call{js: []int{0, 1, 2, 3}}
	var cmd redis.Cmder
	if _, err := n.b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = n.b.persistCmd(ctx, p, batch, &c, []string{"0", "0", "0", "0"}, n.b.roomConfigOf("a"))
		return nil
	}); err != nil {
		t.Fatalf("persist.lua after a fill: %v", err)
	}
	if got, err := cmd.(*redis.Cmd).Int64Slice(); err != nil || len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Fatalf("persist.lua answered %v (%v), want [1 1]", got, err)
	}
	for room, want := range map[string]string{"a": "2:a2 3:a3 4:a4", "b": "2:b2 3:b3"} {
		got := n.stored(t, room)
		if len(got) > 0 && got[0].Seq == 1 {
			got = got[1:]
		}
		if show(got) != want {
			t.Errorf("room %s: stream %s, want %s", room, show(got), want)
		}
	}
}

// TestRedisFollowerWritesWhatAGoneOwnerHeld: an owner holds its followed
// room's writes for the followed linger; cut off from Redis before it
// wrote them (its connections dropped: as killed), its follower, finding
// it unheard or its lease ended, drops the room and writes the messages it
// holds: Redis's stream has every message the owner ordered.
func TestRedisFollowerWritesWhatAGoneOwnerHeld(t *testing.T) {
	_, px, owner, follower := startProxiedOwner(t, Config{History: 100, TTL: time.Hour, FollowedLinger: MaxHistoryLinger})
	const each = 10
	for i := range each {
		owner.publish("r", fmt.Sprintf("m%d", i))
	}
	follower.hasSeq(t, "r", each)
	px.Refuse(true)
	px.Drop()
	if got := follower.stored(t, "r"); len(got) == each {
		t.Fatalf("the owner wrote its followed room's messages at once: %s", show(got))
	}
	// The follower's publishes go to the owner, whose channel nobody
	// listens to any more: unheard.
	deadline := time.Now().Add(20 * time.Second)
	for len(follower.stored(t, "r")) != each {
		if time.Now().After(deadline) {
			follower.h.mu.Lock()
			defer follower.h.mu.Unlock()
			t.Fatalf("the stream holds %s; the follower's calls %q; stats %+v", show(follower.stored(t, "r")), follower.h.calls, follower.b.Stats())
		}
		follower.publish("r", "f")
		time.Sleep(50 * time.Millisecond)
	}
	for i, e := range follower.stored(t, "r") {
		if want := fmt.Sprintf("m%d#%d", i, i+1); e.Seq != uint64(i+1) || string(e.Payload) != want {
			t.Errorf("stored message %d: %d %q, want seq %d %q", i, e.Seq, e.Payload, i+1, want)
		}
	}
}
