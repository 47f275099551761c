package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// startNodeRooms is startNode with rooms that take their history size and
// TTL by namespace, as a server's namespaces give them.
func startNodeRooms(t testing.TB, url string) *node {
	t.Helper()
	return startNodeConfig(t, Config{URL: url, History: 100, TTL: time.Hour, Room: func(room string) RoomConfig {
		switch {
		case strings.HasPrefix(room, "none:"):
			return RoomConfig{History: 0, TTL: 10 * time.Minute}
		case strings.HasPrefix(room, "two:"):
			return RoomConfig{History: 2}
		}
		return RoomConfig{History: 100, TTL: time.Hour}
	}})
}

// Each room's stream keeps its namespace's history and its keys live its
// namespace's TTL, also when rooms of several namespaces share a round of
// writes; a node that loads a room gets its namespace's history size.
func TestRedisRoomConfigPerRoom(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a, b := startNodeRooms(t, rs.URL()), startNodeRooms(t, rs.URL())
	rooms := []string{"plain", "none:r", "two:r"}
	for _, r := range rooms {
		a.join(t, r)
		b.join(t, r) // shared: a orders it, and writes it behind
	}
	for i := range 5 {
		for _, r := range rooms { // one round holds writes of every namespace
			a.publish(r, fmt.Sprintf("m%d", i+1))
		}
	}
	ctx := context.Background()
	for _, r := range rooms {
		b.hasSeq(t, r, 5)
		testsupport.Eventually(t, 10*time.Second, r+" written to Redis", func() bool {
			seq, _ := a.b.rdb.Get(ctx, a.b.seqKey(r)).Uint64()
			return seq == 5
		})
	}
	for _, tc := range []struct {
		room    string
		history int64
		ttl     time.Duration // at least; and at most a quarter more
	}{{"plain", 5, time.Hour}, {"none:r", 0, 10 * time.Minute}, {"two:r", 2, time.Hour}} {
		// persist.lua caps the stream's entries, and a run of messages
		// written in one round is one entry: it may hold more messages than
		// the history, never fewer (a load takes the last ones, below).
		if n := int64(len(a.stored(t, tc.room))); n < tc.history || tc.history == 0 && n != 0 {
			t.Errorf("%s: its stream holds %d messages, want at least %d (none for 0)", tc.room, n, tc.history)
		}
		if got := a.b.rdb.TTL(ctx, a.b.seqKey(tc.room)).Val(); got < tc.ttl-time.Minute || got > tc.ttl*5/4 {
			t.Errorf("%s: its seq's TTL is %v, want %v to a quarter more", tc.room, got, tc.ttl)
		}
	}
	// A node that loads the rooms from Redis, once a and b freed them,
	// gets each its own history's tail.
	for _, n := range []*node{b, a} { // the follower first: a hands the rooms to no one
		for _, r := range rooms {
			n.b.Unsubscribe(r)
		}
	}
	testsupport.Eventually(t, 10*time.Second, "a to release the rooms", func() bool {
		return a.b.rdb.Exists(ctx, a.b.holderKey("plain"), a.b.holderKey("none:r"), a.b.holderKey("two:r")).Val() == 0
	})
	c := startNodeRooms(t, rs.URL())
	for _, tc := range []struct {
		room string
		tail int
	}{{"plain", 5}, {"none:r", 0}, {"two:r", 2}} {
		c.join(t, tc.room)
		c.h.mu.Lock()
		seq, tail := c.h.rooms[tc.room].seq, len(c.h.rooms[tc.room].tail)
		c.h.mu.Unlock()
		if seq != 5 || tail != tc.tail {
			t.Errorf("%s: loaded seq %d with %d messages, want 5 with %d", tc.room, seq, tail, tc.tail)
		}
	}
}
