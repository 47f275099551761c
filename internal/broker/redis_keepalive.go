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
// the new stream's seqs for messages it has (the load that makes the new
// epoch tells them, "E", and their members start anew; before, they
// dropped every message in silence). So each node renews those keys (and the holder of a room it
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

// keptChunk is how many kept rooms a look reads under subscriptions.mu at
// a time (a few ns a room, BenchmarkKeptRoomsLook): between two chunks the
// lock is let go, so that a round's publishes wait for one chunk at most,
// not for a look over every room.
const keptChunk = 4096

// keptRooms is the rooms this node loaded from Redis and keeps alive
// there, in a slice so that a look reads them at a few ns a room. It has
// no lock of its own: it is subscriptions' (the rooms are kept from their
// load and no longer once unsubscribed), and every method is called with
// subscriptions.mu held.
type keptRooms struct {
	rooms    []keptRoom
	at       map[string]int // room → its index in rooms
	removals uint64         // rooms removed so far: a look in chunks sees whether rooms moved
}

func newKeptRooms() keptRooms { return keptRooms{at: map[string]int{}} }

// add keeps room's keys alive from now, renewed first a renewInterval
// after now (its load renewed them).
func (k *keptRooms) add(room string, ttl time.Duration, now time.Time) {
	every := renewInterval(ttl)
	r := keptRoom{name: room, ttl: ttl + every, every: every, due: now.Add(every)}
	if i, ok := k.at[room]; ok {
		k.rooms[i] = r
		return
	}
	k.at[room] = len(k.rooms)
	k.rooms = append(k.rooms, r)
}

// remove stops keeping room's keys alive. The last room takes its place.
func (k *keptRooms) remove(room string) {
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
	k.removals++
}

// keptLook is one look over the kept rooms, made a chunk at a time: the
// rooms due at now, and how long until the earliest of the others.
type keptLook struct {
	now      time.Time
	next     int // the index of the next room to look at
	removals uint64
	moved    bool // rooms were removed between two chunks: one may have moved to a place looked at already
	due      []keptRoom
	wait     time.Duration
}

func newKeptLook(now time.Time) keptLook { return keptLook{now: now, wait: keepAliveMax} }

// look goes on with l over at most n rooms: each due is taken, due again a
// renewInterval later. It reports whether rooms are left to look at.
func (k *keptRooms) look(l *keptLook, n int) (more bool) {
	if l.next == 0 {
		l.removals = k.removals
	} else if k.removals != l.removals {
		l.moved = true
	}
	end := min(l.next+n, len(k.rooms))
	for i := l.next; i < end; i++ {
		r := &k.rooms[i]
		if !l.now.Before(r.due) {
			l.due = append(l.due, *r)
			r.due = l.now.Add(r.every)
		}
		l.wait = min(l.wait, r.due.Sub(l.now))
	}
	l.next = end
	return end < len(k.rooms)
}

// nextLook is how long after l's end the next look comes: until the
// earliest due, within [keepAliveMin, keepAliveMax]; keepAliveMin when a
// room may have been passed over (moved).
func (l *keptLook) nextLook() time.Duration {
	if l.moved {
		return keepAliveMin
	}
	return max(l.wait, keepAliveMin)
}

// failed makes rooms due again at once: Redis did not answer their
// renewal.
func (k *keptRooms) failed(rooms []keptRoom) {
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
	due, next := b.sub.dueKept(now)
	for len(due) > 0 {
		n := min(len(due), maxKeepAlive)
		if !b.renewKept(ctx, due[:n]) {
			b.sub.keptFailed(due)
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
