package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// natsOut is what goes out at the next round: each node's records, in the
// order made, and each owned room's messages for its history. keep fills
// it under a room's lock, so a room's records queue in seq order.
type natsOut struct {
	mu        sync.Mutex
	queues    map[string][]byte              // node → records
	followers map[string]map[string]struct{} // owned room → the nodes following it
	hist      map[string][]Entry             // owned room → messages to write
	last      map[string]uint64              // owned room → the latest seq ordered here
	pos       map[string]*natsHistPos        // owned room → where its history stands
	wake      chan struct{}                  // a round has records
	histWake  chan struct{}                  // history has messages
	// oldest is when the oldest record queued now was queued (unix
	// nanoseconds; 0: none), and writes how many history messages wait:
	// read without the lock by every publish (NATS.overloaded, behind).
	oldest atomic.Int64
	writes atomic.Int64
}

// natsHistPos is an owned room's history: its epoch, and the end of its
// subject this node wrote (or read, when it took the room) last.
type natsHistPos struct {
	epoch string
	end   uint64
}

func (o *natsOut) init() {
	o.queues = make(map[string][]byte)
	o.followers = make(map[string]map[string]struct{})
	o.hist = make(map[string][]Entry)
	o.last = make(map[string]uint64)
	o.pos = make(map[string]*natsHistPos)
	o.wake = make(chan struct{}, 1)
	o.histWake = make(chan struct{}, 1)
}

// add queues a record for node, made by fn.
func (o *natsOut) add(node string, fn func([]byte) []byte) {
	o.mu.Lock()
	o.queuedLocked()
	o.queues[node] = fn(o.queues[node])
	o.mu.Unlock()
	signal(o.wake)
}

// queuedLocked notes when the first record since the last round was queued.
func (o *natsOut) queuedLocked() {
	if len(o.queues) == 0 {
		o.oldest.Store(time.Now().UnixNano())
	}
}

// waited is how long the oldest record queued has waited.
func (o *natsOut) waited() time.Duration {
	t := o.oldest.Load()
	if t == 0 {
		return 0
	}
	return time.Duration(time.Now().UnixNano() - t)
}

// take returns the queued records and starts new queues. The round that
// sends them has them: their wait ends when the next round's begins.
func (o *natsOut) take() map[string][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queues) == 0 {
		return nil
	}
	q := o.queues
	o.queues = make(map[string][]byte, len(q))
	o.oldest.Store(0)
	return q
}

// takeHistory returns the messages to write and starts anew.
func (o *natsOut) takeHistory() map[string][]Entry {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.hist) == 0 {
		return nil
	}
	h := o.hist
	o.hist = make(map[string][]Entry, len(h))
	return h
}

// written counts n history messages written (or dropped with their room).
func (o *natsOut) written(n int) { o.writes.Add(-int64(n)) }

// putBack returns unwritten messages ahead of those queued since.
func (o *natsOut) putBack(room string, run []Entry) {
	o.mu.Lock()
	o.hist[room] = append(run, o.hist[room]...)
	o.mu.Unlock()
}

// follow adds node to room's followers, with its snapshot first.
func (o *natsOut) follow(room, node, epoch string, seq uint64, tail []Entry) {
	o.mu.Lock()
	o.queuedLocked()
	f := o.followers[room]
	if f == nil {
		f = make(map[string]struct{})
		o.followers[room] = f
	}
	f[node] = struct{}{}
	o.queues[node] = appendSnapshotRec(o.queues[node], room, epoch, seq, tail)
	o.mu.Unlock()
	signal(o.wake)
}

func (o *natsOut) unfollow(room, node string) {
	o.mu.Lock()
	delete(o.followers[room], node)
	o.mu.Unlock()
}

// release ends room's ownership here: each follower gets the release
// record after the room's last messages. It returns the latest seq
// ordered here.
func (o *natsOut) release(room, epoch string, seq uint64) uint64 {
	o.mu.Lock()
	o.queuedLocked()
	seq = max(seq, o.last[room])
	for node := range o.followers[room] {
		o.queues[node] = appendReleaseRec(o.queues[node], room, epoch, seq)
	}
	delete(o.followers, room)
	delete(o.last, room)
	o.mu.Unlock()
	signal(o.wake)
	return seq
}

// pendingHistory reports whether room has messages not written yet.
func (o *natsOut) pendingHistory(room string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.hist[room]) > 0
}

// own starts writing room's history in epoch after end: this node holds it.
func (o *natsOut) own(room, epoch string, end uint64) {
	o.mu.Lock()
	o.pos[room] = &natsHistPos{epoch: epoch, end: end}
	o.mu.Unlock()
}

// position returns a copy of room's history position; nil when it is not
// held here.
func (o *natsOut) position(room string) *natsHistPos {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pos[room]
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// wrote moves room's end to a write's.
func (o *natsOut) wrote(room string, end uint64) {
	o.mu.Lock()
	if p := o.pos[room]; p != nil {
		p.end = end
	}
	o.mu.Unlock()
}

// forget ends room's history here (released or taken over): what is
// pending of it is dropped with it.
func (o *natsOut) forget(room string) {
	o.mu.Lock()
	o.writes.Add(-int64(len(o.hist[room])))
	delete(o.pos, room)
	delete(o.hist, room)
	o.mu.Unlock()
}

// lastSeq is the latest seq room ordered here, or seq when later.
func (o *natsOut) lastSeq(room string, seq uint64) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return max(seq, o.last[room])
}

// keep queues an owned room's message for its followers and its history:
// called under the room's lock (NATS.keep), so they queue in seq order.
func (o *natsOut) keep(room string, e Entry) {
	o.mu.Lock()
	followed := len(o.followers[room]) > 0
	if followed {
		o.queuedLocked()
	}
	for node := range o.followers[room] {
		o.queues[node] = appendMsgRec(o.queues[node], room, e)
	}
	o.writes.Add(1)
	o.hist[room] = append(o.hist[room], e)
	o.last[room] = e.Seq
	o.mu.Unlock()
	if followed {
		signal(o.wake)
	}
	signal(o.histWake)
}

// followed reports whether another node follows room, held here.
func (o *natsOut) followed(room string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.followers[room]) > 0
}
