package broker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// A room's keys in Redis expire after its TTL without messages (publishes
// and owned rooms' writes renew them). Its counter, epoch and set of nodes
// must not while a node has the room loaded: the counter would start
// again at 1 under a new epoch, and every node holding the room would take
// the new stream's seqs for messages it has (publish.lua then tells them,
// "E", and their members start anew; before, they dropped every message in
// silence). So each node renews those keys (and the holder of a room it
// owns) for the rooms it has loaded, once a renewInterval, when no publish
// of its own did. The history stream is not renewed: it expires after the
// TTL without messages, as --redis-ttl and history_ttl promise, and a
// member resuming past it is told (history_gap).

// keepAliveMax is the longest a node waits between two looks at its rooms;
// keepAliveMin the shortest (many rooms due, or Redis down).
const (
	keepAliveMax = time.Minute
	keepAliveMin = 100 * time.Millisecond
)

// maxKeepAlive bounds the rooms renewed in one pipeline: the rest go in
// the next, keepAliveMin later.
const maxKeepAlive = 10_000

// keptRoom is a room due for renewal and its keys' TTL.
type keptRoom struct {
	name string
	ttl  time.Duration
}

// keepAliveLoop renews the keys of the rooms this node has loaded, each
// when it is due (keepAlive), until ctx ends.
func (b *Redis) keepAliveLoop(ctx context.Context) {
	t := time.NewTimer(keepAliveMin)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(b.keepAlive(ctx, time.Now()))
	}
}

// keepAlive renews the keys of the rooms due at now, in one pipeline, and
// returns how long to wait before the next look.
func (b *Redis) keepAlive(ctx context.Context, now time.Time) time.Duration {
	if !b.health.up.Load() {
		return keepAliveMin // recovery checks every room against Redis first
	}
	due, next := b.sub.dueForKeepAlive(now, maxKeepAlive)
	if len(due) == 0 {
		return next
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmds, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for _, r := range due {
			p.Expire(c, b.seqKey(r.name), r.ttl)
			p.Expire(c, b.epochKey(r.name), r.ttl)
			p.Expire(c, b.roomNodesKey(r.name), r.ttl)
			if b.holds(r.name) {
				p.Expire(c, b.holderKey(r.name), r.ttl)
			}
		}
		return nil
	})
	if err := pipelineErr(cmds, err); err != nil && ctx.Err() == nil {
		b.fail("renew the rooms' keys", err)
		b.sub.keepFailed(due)
		return keepAliveMin
	}
	return next
}

// dueForKeepAlive returns up to limit rooms loaded here whose keys nothing
// of this node renewed for a renewInterval (a publish, a write or the last
// keep-alive), marking them renewed at now, and how long until the next
// look: half the shortest renewInterval among the rooms, within
// [keepAliveMin, keepAliveMax], or keepAliveMin when limit cut the list.
func (s *subscriptions) dueForKeepAlive(now time.Time, limit int) ([]keptRoom, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := keepAliveMax
	var due []keptRoom
	for name, st := range s.rooms {
		if st.unsynced || st.leaving || st.kept.IsZero() {
			continue // loaded while Redis was down, leaving, or not loaded yet
		}
		every := renewInterval(st.rc.TTL)
		next = min(next, every/2)
		last := st.kept
		if st.renewed.After(last) {
			last = st.renewed
		}
		if now.Sub(last) < every {
			continue
		}
		if len(due) == limit {
			next = keepAliveMin
			break
		}
		st.kept = now
		due = append(due, keptRoom{name: name, ttl: st.rc.TTL + every})
	}
	return due, max(next, keepAliveMin)
}

// keepFailed forgets the renewal of rooms whose pipeline Redis did not
// answer: they are due again at the next look.
func (s *subscriptions) keepFailed(rooms []keptRoom) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rooms {
		if st := s.rooms[r.name]; st != nil {
			st.kept = time.Unix(0, 1) // long ago, not zero (zero: not loaded)
		}
	}
}
