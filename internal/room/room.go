// Package room holds the chat rooms of one node: who is in each room (per
// event loop), the room's sequence numbers and its bounded history, and the
// fan-out of each published message to the event loops that have members.
//
// A message flows: a loop reads a frame and calls Room.Publish. On a single
// node the room, under its lock, assigns the next seq, builds the message
// (its JSON, behind the head its transport sends before it: see Framing)
// once, stores it in the history ring and pushes one Delivery to the Queue
// of every loop with local members; each loop then writes those same bytes
// to its members. On a single node the room does this itself, at once and on
// the publishing goroutine (broker.Memory has nothing to do); in a cluster
// it hands the message to the node's broker.Broker (broker.Redis): the room's owner
// node orders it (Hub.PublishOwned, when that is this node) and the broker
// brings it to every other node that has the room through Hub.DeliverMany,
// where the same fan-out happens. Rooms never touch connections, and loops never
// take a room's lock while delivering.
package room

import (
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
)

// Room is one chat room on this node.
type Room struct {
	name string
	hub  *Hub
	opts Options // from its namespace, fixed when the room is made

	mu         sync.Mutex
	seq        uint64
	epoch      string // names the stream: a new stream of the room has a new epoch
	hist       history
	histBytes  int64     // what hist costs (history.cost of each message)
	histJSON   int64     // bytes of JSON in hist
	lastMsg    time.Time // when the latest message came, kept only with a HistoryTTL
	local      []int32   // members per event loop, indexed like Hub.queues
	members    int
	emptySince time.Time
	closed     bool // freed by the hub: joiners must look the room up again

	// A room is loaded (latest seq and history) from the broker before anyone
	// can join (a single node's broker loads it at once); joiners on a loop
	// wait for a Ready delivery.
	loaded   bool
	waiting  []bool        // loops with joiners waiting for the room to load
	early    []Message     // messages the broker delivered before the load finished
	loadedCh chan struct{} // closed when loaded, for pollers

	notify   chan struct{} // closed and replaced by the next message, for long polls
	lastPoll time.Time     // pollers keep a room without members alive
	pollers  int           // polls waiting on the room now (Hub.OpenPoll)

	// Which node owns the room in a cluster, from which seq and until
	// when, is the broker's (broker.Redis): it asks the room to order a
	// message (Hub.PublishOwned) and to hold its joiners back
	// (broker.JoinGate); the room holds none of it.

	pres presence
}

// Name returns the room's name.
func (r *Room) Name() string { return r.name }

// Publish publishes a message whose JSON is draft with the seq's digits
// inserted at seqAt (see protocol.AppendChatDraft), through the node's
// broker. On a single node the message is in the room's history and on its
// way to every member when Publish returns; in a cluster it is on its way to
// the broker. received (unix nanoseconds) is when the message was read: on a
// single node it travels with the deliveries so that loops can measure the
// processing time; in a cluster the clock starts when the broker brings it
// back. from is the index of the event loop calling Publish on its own
// goroutine, or -1: that loop drains its queue right after handling its
// events, so it is not woken, which saves it a wake-up and an extra
// epoll_wait per message.
//
// It returns the broker's result (broker.Broker.Publish): the seq the
// message got when it was ordered on this node, or 0 when it is on its way
// to the room's owner on another node; broker.ErrUnavailable when the
// broker refused it (a cluster node cut off from Redis, for a room it does
// not own). id, when not 0, is the publisher's number for the message,
// handed with it to the function set by Config.Settled when its answer
// comes later.
func (r *Room) Publish(draft []byte, seqAt int, received int64, from int, id uint64) (uint64, error) {
	p := broker.Publication{Room: r.name, Prefix: draft[:seqAt], Suffix: draft[seqAt:], Received: received, From: from, ID: id}
	if !r.hub.alone {
		return r.hub.broker.Publish(p)
	}
	// A single node's broker.Memory would hand the message straight back
	// (Hub.PublishLocal), which would look the room up by name: ~25 ns,
	// an eighth of a publish.
	if seq, ok := r.publishLocal(p); ok {
		return seq, nil
	}
	return 0, broker.ErrDropped
}

// publishLocal gives a message the room's next seq and delivers it on this
// node; false when the room was freed.
func (r *Room) publishLocal(p broker.Publication) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, false
	}
	r.orderLocked(p)
	return r.seq, true
}

// orderLocked gives p the room's next seq, delivers it on this node, and
// tells the node's publish webhook (in seq order, under the room's lock):
// the order of a single node, and of a cluster's owner node. It returns the
// message.
func (r *Room) orderLocked(p broker.Publication) Message {
	m := r.hub.draftMessage(r.seq+1, p.Prefix, p.Suffix)
	r.appendLocked(m, p.Received, p.From)
	if r.opts.PublishWebhook && r.hub.tracker != nil {
		r.hub.tracker.Published(r.name, m.Seq, m.JSON())
	}
	return m
}

// publishOwned orders and delivers a message of a room this node owns, and
// hands it to keep under the room's lock (so in seq order); it reports false
// when the room does not order here now (see ordersLocked).
func (r *Room) publishOwned(p broker.Publication, from uint64, keep func(room string, e broker.Entry)) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ordersLocked(from) {
		return 0, false
	}
	m := r.orderLocked(p)
	keep(r.name, broker.Entry{Seq: m.Seq, Payload: m.JSON()})
	return m.Seq, true
}

// ordersLocked reports whether the room, which the broker owns here from
// seq from, can order its messages now: loaded, not freed, and every seq
// handed out before (up to from) arrived. (That the node holds the room,
// its lease lives and none of its publishes is still on its way to another
// node's order is the broker's to check: it knows.)
func (r *Room) ordersLocked(from uint64) bool {
	return !r.closed && r.loaded && r.seq >= from
}

// appendLocked makes m the room's latest message: history, then every
// loop with members. Pushing under the room's lock is what gives every
// member the room's messages in one order. received is when the message
// reached this node (unix nanoseconds; 0 for history loaded from the
// broker, which is not timed). from is the loop not to wake (the one
// publishing, which drains its queue next), or quiet: none, the caller
// wakes them (Hub.DeliverMany).
func (r *Room) appendLocked(m Message, received int64, from int) {
	r.seq = m.Seq
	if r.hub.compress {
		m.z = &encoded{}
	}
	if r.opts.HistoryTTL > 0 { // only rooms with a TTL read the clock here
		r.lastMsg = time.Now()
	}
	grew, evicted := r.hist.add(m)
	if grew {
		r.hub.historyEntries.Add(1)
	}
	if r.hist.limit > 0 {
		total := r.countLocked(toEntry(m), evicted)
		// Over the node's budget: this room, the one growing, gives back
		// its oldest messages.
		for max := r.hub.maxHistoryBytes; max > 0 && total > max && r.hist.n > 0; {
			total = r.countLocked(entry{}, r.hist.dropOldest())
			r.hub.historyEntries.Add(-1)
		}
	}
	for i, n := range r.local {
		if n > 0 {
			r.hub.queues[i].push(Delivery{Room: r, Message: m, Received: received}, i != from && from != quiet)
		}
	}
	if r.notify != nil {
		close(r.notify)
		r.notify = nil
	}
}

// countLocked adds what add costs the history and takes away what drop
// cost to the room's and the hub's counts (either may be the zero entry),
// and returns the hub's cost. The hub's counts are shared by every loop: a
// message that evicts one of its size class (the usual case once a room's
// history is full) changes neither, and touches neither's cache line.
func (r *Room) countLocked(add, drop entry) int64 {
	c := r.hist.cost(add) - r.hist.cost(drop)
	j := add.jsonLen() - drop.jsonLen()
	r.histBytes += c
	r.histJSON += j
	if j != 0 {
		r.hub.historyJSON.Add(j)
	}
	if c == 0 {
		return r.hub.historyBytes.Load()
	}
	return r.hub.historyBytes.Add(c)
}

// forgetHistoryLocked gives back the room's history when the room is freed
// or dropped.
func (r *Room) forgetHistoryLocked() {
	r.hub.historyEntries.Add(-int64(r.hist.n))
	r.hub.historyBytes.Add(-r.histBytes)
	r.hub.historyJSON.Add(-r.histJSON)
	r.hist, r.histBytes, r.histJSON = history{}, 0, 0
}

// Resume is where a client asks to pick a room's stream up: after seq
// Since of the stream called Epoch. Without Since it gets the whole
// history; without Epoch (older clients) the stream is taken to be the
// current one.
type Resume struct {
	Since    uint64
	HasSince bool
	Epoch    string
}

// PollResult is what a poller finds in a room.
type PollResult struct {
	Epoch    string          // the room's stream
	Reset    bool            // with Gap: the client's since belongs to another stream of the room
	Seq      uint64          // latest seq
	Messages []Message       // after since (or the whole history without since), in seq order
	Gap      bool            // since asked for messages no longer held
	FirstSeq uint64          // oldest seq held, meaningful with Gap
	Wait     <-chan struct{} // with no message: closed when the next one comes (or the room loads)
}

// Poll returns the messages after since, like a join with since but without
// becoming a member, and counts as activity that keeps the room alive.
// Messages are appended to dst.
func (r *Room) Poll(rs Resume, dst []Message) PollResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastPoll = time.Now()
	if !r.loaded {
		return PollResult{Wait: r.loadedCh}
	}
	r.expireLocked(r.lastPoll)
	res := PollResult{Epoch: r.epoch, Seq: r.seq, FirstSeq: r.hist.oldest()}
	res.Messages, res.Gap, res.Reset = r.replayLocked(rs, dst)
	if len(res.Messages) == 0 && !res.Gap {
		if r.notify == nil {
			r.notify = make(chan struct{})
		}
		res.Wait = r.notify
	}
	return res
}

// Closed reports whether the hub freed the room; look it up again.
func (r *Room) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// JoinResult describes the room as a new member finds it.
type JoinResult struct {
	Full bool // the room does not exist and the node holds as many rooms as it may
	// MembersFull: the room has its Options.MaxMembers already; not joined.
	MembersFull bool
	Epoch       string    // the room's stream
	Reset       bool      // with Gap: the client's since belongs to another stream of the room
	Pending     bool      // the room is loading from the broker: join again after its Ready delivery
	Seq         uint64    // latest seq: later messages come through the loop's queue
	Members     int       // members after joining, this one included
	History     []Message // the messages to replay, in seq order, all with Seq ≤ the Seq field
	Gap         bool      // since asked for messages that are no longer held
	FirstSeq    uint64    // oldest seq held (0 when none), meaningful with Gap
	// Unavailable: the client resumes from another stream of the room
	// while the broker cannot tell which stream is current (a cluster
	// node cut off from Redis, or still checking its rooms after it):
	// served here, the client could be handed back a stream it had left
	// (every message of it again). Not joined; resume later.
	Unavailable bool
}

// join adds a member on loop. It reports false when the room was freed
// meanwhile and must be looked up again.
func (r *Room) join(loop int, rs Resume, dst []Message) (JoinResult, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return JoinResult{}, false
	}
	if !r.loaded || r.hub.joinsWait(r.name) {
		// Not loaded yet; or owned by this node, whose lease lapsed (it
		// was stopped, or cut off): another node may have taken the room
		// over, and the broker checks before anyone joins
		// (broker.JoinGate).
		r.waiting[loop] = true
		return JoinResult{Pending: true}, true
	}
	if rs.HasSince && rs.Epoch != "" && rs.Epoch != r.epoch && !r.hub.broker.Stats().InStep {
		return JoinResult{Unavailable: true}, true
	}
	if r.fullLocked() {
		return JoinResult{MembersFull: true}, true
	}
	r.expireLocked(time.Now())
	r.local[loop]++
	r.members++
	res := JoinResult{Epoch: r.epoch, Seq: r.seq, Members: r.members, FirstSeq: r.hist.oldest()}
	res.History, res.Gap, res.Reset = r.replayLocked(rs, dst)
	if r.behind(rs) {
		// The member has everything up to its since already: the messages
		// this node has yet to receive up to there are not for it.
		res.Seq = rs.Since
	}
	return res, true
}

// replayLocked appends to dst what a newcomer resuming at rs gets (all the
// history without since), and reports whether some of what it asked for is
// no longer held (gap), and whether that is because its since belongs to
// another stream of the room (reset).
func (r *Room) replayLocked(rs Resume, dst []Message) (msgs []Message, gap, reset bool) {
	switch {
	case !rs.HasSince:
		return r.hist.appendLast(dst, r.hist.n), false, false
	case r.behind(rs):
		return dst, false, false
	case rs.Since > 0 && rs.Epoch != "" && rs.Epoch != r.epoch, rs.Since > r.seq:
		// (A client at since 0 saw no message of any stream: it has
		// nothing to reset, whatever epoch it names. A room nobody wrote
		// to is freed when its last poller leaves and made again, under a
		// new epoch, by the next poll: see OpenPoll.)
		// The client saw another stream of this room (it was freed and
		// made again, or its history was lost): its since means nothing
		// here. Replay all we hold, never from its seq.
		return r.hist.appendLast(dst, r.hist.n), true, true
	}
	gap = rs.Since < r.seq && (r.hist.n == 0 || rs.Since+1 < r.hist.oldest())
	return r.hist.appendSince(dst, rs.Since), gap, false
}

// behind reports whether this node is behind the client in the room's
// stream: the client names the current epoch and has seen a seq this node
// has not yet received (in a cluster, a node whose subscription lags, e.g.
// after a pause). Nothing is replayed then, and nothing up to since is
// delivered; the client never sent its epoch without having seen it.
func (r *Room) behind(rs Resume) bool {
	return rs.HasSince && rs.Epoch != "" && rs.Epoch == r.epoch && rs.Since > r.seq
}

// Leave removes a member on loop and returns the room's latest seq: the
// loop delivers it nothing newer.
func (r *Room) Leave(loop int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.local[loop]--
	r.members--
	if r.members == 0 {
		r.emptySince = time.Now()
	}
	return r.seq
}

// Members returns the number of members on this node.
func (r *Room) Members() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.members
}
