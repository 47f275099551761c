package broker

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// jobKind is what a pending job asks of Redis.
type jobKind uint8

const (
	jobPersist  jobKind = iota // store a message an owning node ordered
	jobRelease                 // give up the ownership of a room
	jobPresence                // record and announce a user's connections here
	jobSend                    // a record of the owner protocol to another node's channel
	jobHandover                // hand an owned room to a node that follows it
	jobFill                    // write what a follower held of a room whose owner is gone
)

// job is one pending request to Redis. Jobs go out in the order they were
// queued, one pipeline per round.
type job struct {
	kind jobKind
	room string // jobPersist, jobRelease, jobPresence, and jobSend of a message
	e    Entry  // jobPersist and jobSend of a message: the message; jobRelease: Seq, the room's last; jobPresence: Seq, the count
	user string // jobPresence
	node string // jobSend: the node whose channel it goes to
	rec  []byte // jobSend: the record (redis_followwire.go); nil: an M record of room and e, made when sent
	// jobHandover: the new owner first, then the room's other followers
	nodes []string
	fill  *fillJob // jobFill
	// jobPersist: another node follows the room, so holds the message
	// too, which may then wait Config.FollowedLinger
	followed bool
}

// publisher is the jobs waiting for the next round to Redis (publishLoop),
// and the channels that wake that loop. Its lock is a leaf, taken under a
// room's lock (keep), ownState.mu and fillMu: nothing is taken under it,
// and its wakes are sent after it is let go.
type publisher struct {
	mu      sync.Mutex
	pending []job
	// persists are the writes of owned rooms pending, apart: they wait
	// out the rounds of other jobs (takeRound) without being copied from
	// round to round. A room's release or handover moves them into pending
	// first, so that they go before it.
	persists []job
	// due is the writes a round left (roundCut), sorted by room already,
	// each room's in order: the rounds right after take them from the
	// front, before any write in persists, and never sort them again. Put
	// back among the new writes and sorted with them every round, a
	// backlog of writes cost a round a sort of the whole backlog, under
	// load past a Redis round's pace a growing one, and the rounds slowed
	// as it grew (a node past the knee spent a fifth of its CPU sorting,
	// 2026-11-27, docs/benchmarks-log.md).
	due  []job
	wake chan struct{} // a publish is pending: send within publishLinger
	// persistWake: only writes of owned rooms are pending, which may wait.
	persistWake chan struct{}
	// persistAt is when the oldest write of an owned room pending was
	// queued (zero: none), and handing whether a room's release or handover
	// is pending: until persistLinger passed, or a room changes hands
	// (whose writes must go first), writes wait out the rounds that carry
	// other jobs (takeRound), so that a round of a room with followers, every
	// Linger, does not cost Redis a script.
	persistAt time.Time
	handing   bool
	// soonAt is when the oldest write pending of a room no other node
	// follows was queued (zero: none): that one waits persistLinger at
	// most, the writes of followed rooms followedLinger (their followers
	// hold the messages too: redis_fill.go).
	soonAt time.Time
	// persistLinger is how long writes of owned rooms may wait
	// (Config.HistoryLinger), followedLinger those of rooms other nodes
	// follow (Config.FollowedLinger).
	persistLinger, followedLinger time.Duration
	// waiting is when the oldest pending job bound for other nodes (any
	// but a write of an owned room) was queued, in Unix nanoseconds, and
	// sending that of the round being sent; 0: none. Publish reads them
	// without the lock (waited) to refuse what would queue past
	// Config.MaxWait.
	waiting, sending atomic.Int64
	// writes is how many writes of owned rooms are pending (persists and
	// due), stored under mu, read without it by Publish (Redis.behind).
	writes atomic.Int64
}

func newPublisher(persistLinger, followedLinger time.Duration) publisher {
	return publisher{wake: make(chan struct{}, 1), persistWake: make(chan struct{}, 1),
		persistLinger: persistLinger, followedLinger: max(followedLinger, persistLinger)}
}

// queue appends jobs to the round and wakes the loop to send it soon.
func (q *publisher) queue(jobs ...job) {
	q.add(jobs...)
	signal(q.wake)
}

// add appends jobs to the round without waking the loop. It reports
// whether the writes of owned rooms held reached maxHeldWrites: then the
// caller wakes the loop (wake) to send them without waiting out the linger;
// and whether a write moved the time the writes are due nearer (the first
// write pending, or the first of a room nobody follows): only then need the
// loop, which may be waiting for the writes pending, be woken
// (persistWake) to wait less. Woken for every write, it cost a node a
// goroutine wake-up a message.
func (q *publisher) add(jobs ...job) (full, sooner bool) {
	q.mu.Lock()
	for _, j := range jobs {
		switch j.kind {
		case jobPersist:
			if q.persistAt.IsZero() {
				q.persistAt = time.Now()
				sooner = true
			}
			if !j.followed && q.soonAt.IsZero() {
				q.soonAt = time.Now()
				sooner = true
			}
			q.persists = append(q.persists, j)
			full = full || len(q.persists) >= maxHeldWrites
			continue
		case jobRelease, jobHandover:
			q.handing = true
			q.pending = append(q.pending, q.due...)
			q.due = nil
			q.pending = append(q.pending, q.persists...)
			clear(q.persists)
			q.persists = q.persists[:0]
		}
		q.pending = append(q.pending, j)
		if q.waiting.Load() == 0 {
			q.waiting.Store(time.Now().UnixNano())
		}
	}
	q.countWrites()
	q.mu.Unlock()
	return full, sooner
}

// takeRound returns the jobs of the next round and leaves into, empty, in
// their place: all of them, and the writes of owned rooms due. Writes a
// round left (due) go first, from the front, a round's share at a time; the
// others, while they are younger than the persist linger and no room
// changes hands, stay for a later round (held). Of the writes due a round
// carries about maxRoundWrites (roundCut); the rest are due at once. held
// reports writes left pending.
func (q *publisher) takeRound(into []job, now time.Time) (batch []job, held bool) {
	q.mu.Lock()
	// Every job bound for other nodes goes in this round: the oldest
	// of them is now the round's.
	if w := q.waiting.Swap(0); w != 0 {
		q.sending.Store(w)
	}
	batch, q.pending = q.pending, into
	if len(q.due) > 0 {
		k := roundCut(q.due)
		batch = append(batch, q.due[:k]...)
		if clear(q.due[:k]); k < len(q.due) {
			q.due = q.due[k:]
		} else {
			q.due = nil
		}
		held = len(q.due) > 0 || len(q.persists) > 0
		q.countWrites()
		q.mu.Unlock()
		return batch, held
	}
	held = len(q.persists) > 0 && len(q.persists) < maxHeldWrites && !q.handing && q.dueInLocked(now) > 0
	if held || len(q.persists) == 0 {
		q.mu.Unlock()
		return batch, held
	}
	persists := q.persists
	q.persists = nil
	q.persistAt, q.soonAt, q.handing = time.Time{}, time.Time{}, false
	q.countWrites()
	q.mu.Unlock()
	// Sorted once let go: rooms publishing (keep, under their own lock)
	// wait for mu, never for the sort.
	byRoomStable(persists)
	if k := roundCut(persists); k < len(persists) {
		q.leave(persists[k:])
		persists, held = persists[:k], true
	}
	// Behind the round's other jobs: Redis runs a pipeline in order, and
	// the records other nodes wait for must not wait for a second of a
	// busy node's writes. A room's writes queued before its release or
	// handover are in batch already, ahead of it.
	return append(batch, persists...), held
}

// leave keeps the writes a round left, sorted, as due: the rounds right
// after take them before any queued since. A room's release or handover
// queued while they were being sorted must go after them: then they go
// ahead of every job pending instead (each room's writes still in order:
// all pending came later).
func (q *publisher) leave(rest []job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.handing {
		q.pending = append(rest[:len(rest):len(rest)], q.pending...)
		return
	}
	q.due = rest
	q.countWrites()
}

// countWrites stores how many writes of owned rooms are pending. The
// caller holds mu.
func (q *publisher) countWrites() { q.writes.Store(int64(len(q.persists) + len(q.due))) }

// roundCut is how many of the writes due, sorted by room, one round
// carries: at most maxRoundWrites, but never part of a room's (they are one
// stream entry, and keep their order), so more for a room that straddles
// the bound.
func roundCut(persists []job) int {
	k := min(maxRoundWrites, len(persists))
	for k < len(persists) && persists[k].room == persists[k-1].room {
		k++
	}
	return k
}

// dueIn is how long the writes of owned rooms pending may still wait:
// persistLinger when none is.
func (q *publisher) dueIn(now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.persistAt.IsZero() && len(q.due) == 0 {
		return q.persistLinger
	}
	return max(q.dueInLocked(now), 0)
}

// dueInLocked is how long the writes pending may wait, until the first of
// them is due; 0 or less: now. Called with mu held.
func (q *publisher) dueInLocked(now time.Time) time.Duration {
	if len(q.due) > 0 {
		return 0
	}
	d := q.followedLinger - now.Sub(q.persistAt)
	if !q.soonAt.IsZero() {
		d = min(d, q.persistLinger-now.Sub(q.soonAt))
	}
	return d
}

// byRoomStable puts each room's writes side by side, in their order, so
// that a room's messages of the linger share a script call and a stream
// entry; the order between rooms does not matter.
func byRoomStable(persists []job) {
	slices.SortStableFunc(persists, func(a, b job) int { return strings.Compare(a.room, b.room) })
}

// takePersists appends the pending writes of owned rooms to into, each
// room's side by side (byRoomStable). The caller holds mu.
func (q *publisher) takePersists(into []job) []job {
	into = append(into, q.due...)
	q.due = nil
	byRoomStable(q.persists)
	into = append(into, q.persists...)
	clear(q.persists)
	q.persists = q.persists[:0]
	return into
}

// splitKind returns the jobs of kind, in order, and others with the rest
// appended in order. others may share jobs' array from its start: each
// job is appended no further than where it was read.
func splitKind(jobs []job, kind jobKind, others []job) (ofKind, rest []job) {
	rest = others
	for _, j := range jobs {
		if j.kind == kind {
			ofKind = append(ofKind, j)
		} else {
			rest = append(rest, j)
		}
	}
	return ofKind, rest
}

// sent records that the round taken last is done.
func (q *publisher) sent() { q.sending.Store(0) }

// waited returns how long the oldest job bound for other nodes, pending or
// in the round being sent, has waited: 0 when there is none, and without
// reading the clock then.
func (q *publisher) waited(now func() int64) time.Duration {
	since := q.sending.Load()
	if since == 0 {
		since = q.waiting.Load()
	}
	if since == 0 {
		return 0
	}
	return time.Duration(max(now()-since, 0))
}

// takeSends takes the pending records for other nodes' channels, in order,
// and leaves the other jobs.
func (q *publisher) takeSends() []job {
	q.mu.Lock()
	defer q.mu.Unlock()
	sends, rest := splitKind(q.pending, jobSend, q.pending[:0])
	q.pending = rest
	return sends
}

// takeWrites takes the pending jobs, the writes of owned rooms first, in
// order. At shutdown: what it takes goes out once. It used to leave them pending, and the records
// for other nodes among them went out again after the handover (signOff's
// takeSends): a publish this node had forwarded to an owner was ordered
// twice, under two seqs.
func (q *publisher) takeWrites() []job {
	q.mu.Lock()
	defer q.mu.Unlock()
	ws := append(q.takePersists(nil), q.pending...)
	clear(q.pending)
	q.pending = q.pending[:0]
	q.persistAt, q.soonAt, q.handing = time.Time{}, time.Time{}, false
	q.countWrites()
	return ws
}
