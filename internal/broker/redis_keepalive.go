package broker

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A room's keys in Redis expire after its TTL without messages (publishes
// and owned rooms' writes renew them). Its counter, epoch and set of nodes
// must not while a node has the room loaded: the counter would start
// again at 1 under a new epoch, and every node holding the room would take
// the new stream's seqs for messages it has (publish.lua now tells them,
// "E", and their members start anew; before, they dropped every message in
// silence). So each node renews those keys (and the holder of a room it
// owns) once a renewInterval for every room it loaded from Redis, active
// or not: three EXPIREs a room every quarter TTL cost Redis less than
// knowing which rooms a publish renewed. The history stream is not
// renewed: it expires after the TTL without messages, as --redis-ttl and
// history_ttl promise, and a member resuming past it is told (history_gap).

// keepAliveMax is the longest a node waits between two looks at its rooms;
// keepAliveMin the shortest (a short TTL, or Redis down).
const (
	keepAliveMax = time.Minute
	keepAliveMin = 100 * time.Millisecond
)

// maxKeepAlive bounds the rooms renewed in one pipeline: a node with more
// due sends several, one after another.
const maxKeepAlive = 10_000

// keptRoom is a room whose keys this node keeps alive.
type keptRoom struct {
	name  string
	ttl   time.Duration // the keys' TTL: the room's and a renewInterval
	every time.Duration // how often they are renewed: a renewInterval
	due   time.Time     // when to renew them next
}

// keptRooms is the rooms this node loaded from Redis and keeps alive
// there, in a slice so that a look reads them at a few ns a room, apart
// from the subscriptions' map and lock, which publishes take. Its lock is a
// leaf, taken under subscriptions.mu (add and remove follow the rooms'
// subscriptions).
type keptRooms struct {
	mu    sync.Mutex
	rooms []keptRoom
	at    map[string]int // room → its index in rooms
}

func newKeptRooms() keptRooms { return keptRooms{at: map[string]int{}} }

// add keeps room's keys alive from now, renewed first a renewInterval
// after now (its load renewed them).
func (k *keptRooms) add(room string, ttl time.Duration, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	every := renewInterval(ttl)
	r := keptRoom{name: room, ttl: ttl + every, every: every, due: now.Add(every)}
	if i, ok := k.at[room]; ok {
		k.rooms[i] = r
		return
	}
	k.at[room] = len(k.rooms)
	k.rooms = append(k.rooms, r)
}

// remove stops keeping room's keys alive.
func (k *keptRooms) remove(room string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i, ok := k.at[room]
	if !ok {
		return
	}
	last := len(k.rooms) - 1
	k.rooms[i] = k.rooms[last]
	k.at[k.rooms[i].name] = i
	k.rooms[last] = keptRoom{}
	k.rooms = k.rooms[:last]
	delete(k.at, room)
}

// take returns the rooms due at now, due again a renewInterval later, and
// how long until the next look: until the earliest due, within
// [keepAliveMin, keepAliveMax].
func (k *keptRooms) take(now time.Time) ([]keptRoom, time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	next := keepAliveMax
	var due []keptRoom
	for i := range k.rooms {
		r := &k.rooms[i]
		if !now.Before(r.due) {
			due = append(due, *r)
			r.due = now.Add(r.every)
		}
		next = min(next, r.due.Sub(now))
	}
	return due, max(next, keepAliveMin)
}

// failed makes rooms due again at once: Redis did not answer their
// renewal.
func (k *keptRooms) failed(rooms []keptRoom) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range rooms {
		if i, ok := k.at[r.name]; ok {
			k.rooms[i].due = time.Time{}
		}
	}
}

// keepAliveLoop renews the keys of the rooms this node has loaded, each
// when it is due, until ctx ends.
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

// keepAlive renews the keys of the rooms due at now, in pipelines of at
// most maxKeepAlive rooms, and returns how long to wait before the next
// look.
func (b *Redis) keepAlive(ctx context.Context, now time.Time) time.Duration {
	if !b.health.up.Load() {
		return keepAliveMin // recovery checks every room against Redis first
	}
	due, next := b.sub.kept.take(now)
	for len(due) > 0 {
		n := min(len(due), maxKeepAlive)
		if !b.renewKept(ctx, due[:n]) {
			b.sub.kept.failed(due)
			return keepAliveMin
		}
		due = due[n:]
	}
	return next
}

// renewKept renews the keys of rooms in one pipeline and reports whether
// Redis answered.
func (b *Redis) renewKept(ctx context.Context, rooms []keptRoom) bool {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmds, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for _, r := range rooms {
			p.Expire(c, b.seqKey(r.name), r.ttl)
			p.Expire(c, b.epochKey(r.name), r.ttl)
			p.Expire(c, b.roomNodesKey(r.name), r.ttl)
			if b.holds(r.name) {
				p.Expire(c, b.holderKey(r.name), r.ttl)
			}
		}
		return nil
	})
	if err := pipelineErr(cmds, err); err != nil {
		if ctx.Err() == nil {
			b.fail("renew the rooms' keys", err)
		}
		return false
	}
	return true
}
