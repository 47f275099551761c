package room

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
)

// Hub is the set of rooms of one node.
type Hub struct {
	shards  [shardCount]shard
	queues  []*Queue
	history int
	grace   time.Duration
	broker  broker.Broker
	cluster broker.Cluster  // the broker, when it is one of several nodes; nil: a single node
	gate    broker.JoinGate // the broker, when its rooms' joins may wait for it; nil: they never do

	compress        bool    // messages carry a compressed encoding, made on first use
	framing         Framing // what goes before each message's JSON; nil: nothing
	maxRooms        int64   // 0: no limit
	maxHistoryBytes int64   // 0: no limit

	rooms          atomic.Int64
	historyEntries atomic.Int64
	historyBytes   atomic.Int64 // what the histories cost: see history.cost
	historyJSON    atomic.Int64 // bytes of JSON the histories hold

	resolve    func(name string) Options                         // a new room's options (Config.Options)
	disconnect func(broker.Disconnect)                           // closes connections of this node (Config.Disconnect)
	settled    func(p broker.Publication, seq uint64, err error) // a publish's late answer (Config.Settled)
	tracker    Tracker                                           // the webhooks (Config.Tracker); nil: none
	alone      bool                                              // a single node: broker.Memory, which stores nothing
}

// Config is what a node's rooms are built from: given once to NewHub, it
// does not change while the hub runs.
type Config struct {
	// History is how many messages each room keeps, when Options is nil.
	History int
	// Options, when not nil, gives the options of a room, called once
	// when the room is made (its namespace's; see Options).
	Options func(name string) Options
	// Grace is how long a room stays after its last member left (and its
	// last poll), before it is freed.
	Grace time.Duration
	// Queues holds one Queue per event loop; the loop indices passed to
	// Join and Leave index it.
	Queues []*Queue
	// MaxRooms caps the rooms held on this node (0: no cap).
	MaxRooms int
	// MaxHistoryBytes caps what all histories cost (HistoryBytes; 0: no
	// cap): the room that grows past it gives back its oldest messages.
	MaxHistoryBytes int64
	// Compression makes every message able to give a compressed encoding
	// (Message.Compressed), for connections that negotiated it.
	Compression bool
	// Framing is what the transport sends before each message's JSON,
	// written once per message in front of it; nil: nothing.
	Framing Framing
	// Broker makes the node's broker for the hub's rooms (its Handler); nil
	// gives a single node's broker.Memory.
	Broker func(broker.Handler) (broker.Broker, error)
	// Disconnect closes the connections that a broker.Disconnect names (the
	// server's connections are not the rooms'); nil: none is closed.
	Disconnect func(broker.Disconnect)
	// Settled hands the publisher of a publication (its ID, which
	// Room.Publish was given) the answer that came after Publish returned:
	// the seq the room's owner gave it, or 0 and why (broker.ErrOverloaded:
	// refused by the owner; broker.ErrUnavailable: given up, the outcome
	// unknown); nil: nobody is told. It is called on the broker's
	// goroutines.
	Settled func(p broker.Publication, seq uint64, err error)
	// Tracker, when not nil, is told what the rooms do, for the webhooks.
	Tracker Tracker
}

// Tracker is told what a node's rooms do (webhook.Tracker is one). Its
// methods must not block: they run on the event loops' paths.
type Tracker interface {
	// Presence says this node now has count connections of user ("" for
	// none given) in room. It is told under the room's lock, in the order
	// the counts were made, so it must only record: never block, never
	// call the rooms.
	Presence(room, user string, count int)
	// Published is told every message this node orders in a room whose
	// Options.PublishWebhook is on, under the room's lock, in seq order:
	// once per message in a cluster, by its room's owner. It must not
	// change message.
	Published(room string, seq uint64, message []byte)
}

// Disconnect implements broker.Handler.
func (h *Hub) Disconnect(d broker.Disconnect) {
	if h.disconnect != nil {
		h.disconnect(d)
	}
}

// Settled implements broker.Handler.
func (h *Hub) Settled(p broker.Publication, seq uint64, err error) {
	if h.settled != nil && p.ID != 0 {
		h.settled(p, seq, err)
	}
}

// Occupied returns the rooms with members on this node, with how many.
func (h *Hub) Occupied() map[string]int {
	rooms := make(map[string]int)
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		for name, r := range s.rooms {
			if n := r.Members(); n > 0 {
				rooms[name] = n
			}
		}
		s.mu.Unlock()
	}
	return rooms
}

// HistoryBytes returns what all histories cost: each message's buffer as
// allocated (JSON, framing head, the allocator's rounding) and its slot in
// the ring, and with compression the slot and cell of its compressed
// encoding.
func (h *Hub) HistoryBytes() int64 { return h.historyBytes.Load() }

// HistoryJSONBytes returns the bytes of JSON held in all histories: what
// an entry costs beyond its JSON is (HistoryBytes - HistoryJSONBytes) /
// HistoryEntries.
func (h *Hub) HistoryJSONBytes() int64 { return h.historyJSON.Load() }

// NewHub returns the rooms of a node as cfg says, with the broker that
// cfg.Broker makes for them. It fails only when cfg.Broker does.
func NewHub(cfg Config) (*Hub, error) {
	h := &Hub{queues: cfg.Queues, history: cfg.History, grace: cfg.Grace,
		compress: cfg.Compression, framing: cfg.Framing, maxRooms: int64(cfg.MaxRooms), maxHistoryBytes: cfg.MaxHistoryBytes,
		resolve: cfg.Options, disconnect: cfg.Disconnect, settled: cfg.Settled, tracker: cfg.Tracker}
	for i := range h.shards {
		h.shards[i].rooms = make(map[string]*Room)
	}
	if cfg.Broker == nil {
		h.broker, h.alone = broker.NewMemory(h), true
		return h, nil
	}
	b, err := cfg.Broker(h)
	if err != nil {
		return nil, err
	}
	h.broker = b
	h.cluster, _ = b.(broker.Cluster)
	h.gate, _ = b.(broker.JoinGate)
	return h, nil
}

func (h *Hub) shard(name []byte) *shard {
	// FNV-1a
	x := uint32(2166136261)
	for _, c := range name {
		x ^= uint32(c)
		x *= 16777619
	}
	return &h.shards[x%shardCount]
}

var _ broker.Handler = (*Hub)(nil)

// Broker returns the hub's broker.
func (h *Hub) Broker() broker.Broker { return h.broker }

// Cluster returns the hub's broker as a broker of several nodes, or false
// on a single node.
func (h *Hub) Cluster() (broker.Cluster, bool) { return h.cluster, h.cluster != nil }

// Join makes a connection on loop a member of the room called name, creating
// the room when needed, and returns the room and what the member should be
// sent first (see JoinResult). History messages are appended to dst.
func (h *Hub) Join(name []byte, loop int, rs Resume, dst []Message) (*Room, JoinResult) {
	for {
		r := h.Open(name)
		if r == nil {
			return nil, JoinResult{Full: true}
		}
		if res, ok := r.join(loop, rs, dst); ok {
			return r, res
		}
	}
}

// Open returns the room called name, creating it (and, in a cluster,
// starting to load it) when needed, or nil when it does not exist and the
// node holds as many rooms as it may. A room opened and never joined is
// freed after the grace period, unless polled.
func (h *Hub) Open(name []byte) *Room {
	s := h.shard(name)
	s.mu.Lock()
	r := s.rooms[string(name)]
	created := r == nil
	if created && h.maxRooms > 0 && h.rooms.Load() >= h.maxRooms {
		s.mu.Unlock()
		return nil
	}
	if created {
		r = &Room{name: string(name), hub: h, opts: h.options(string(name)), local: make([]int32, len(h.queues)),
			waiting: make([]bool, len(h.queues)), emptySince: time.Now(), loadedCh: make(chan struct{})}
		r.hist = newHistory(r.opts.History, h.compress)
		s.rooms[r.name] = r
		s.queueLocked(r.name, true)
		h.rooms.Add(1)
	}
	s.mu.Unlock()
	if created {
		s.flush(h.broker)
	}
	return r
}

// Lookup returns the room called name, or nil when it does not exist.
func (h *Hub) Lookup(name []byte) *Room {
	return h.lookup(name)
}

func (h *Hub) lookup(name []byte) *Room {
	s := h.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rooms[string(name)]
}

// Rooms returns the number of rooms held, empty ones in their grace period
// included.
func (h *Hub) Rooms() int64 { return h.rooms.Load() }

// HistoryEntries returns the number of messages held in all histories.
func (h *Hub) HistoryEntries() int64 { return h.historyEntries.Load() }

// Sweep frees the rooms that have been empty for the grace period and
// returns how many it freed.
func (h *Hub) Sweep(now time.Time) int {
	freed := 0
	for i := range h.shards {
		s := &h.shards[i]
		n := 0
		s.mu.Lock()
		for _, r := range s.rooms {
			r.mu.Lock()
			// A joiner waiting for the room to load keeps it: freed, the
			// room would never load and the joiner never hear of it.
			if r.members == 0 && r.pollers == 0 && !r.joinersWaitingLocked() && now.Sub(r.emptySince) >= h.grace && now.Sub(r.lastPoll) >= h.grace {
				h.freeLocked(s, r)
				n++
			}
			r.mu.Unlock()
		}
		s.mu.Unlock()
		if n > 0 {
			h.rooms.Add(-int64(n))
			s.flush(h.broker)
			freed += n
		}
	}
	return freed
}

// freeLocked takes r out of its shard, gives back its history and queues
// its unsubscription; the caller holds s.mu and r.mu, then counts the room
// gone and flushes the shard's changes to the broker.
func (h *Hub) freeLocked(s *shard, r *Room) {
	r.closed = true
	delete(s.rooms, r.name)
	s.queueLocked(r.name, false)
	r.forgetHistoryLocked()
	if r.notify != nil { // pollers look the room up again
		close(r.notify)
		r.notify = nil
	}
}

// Run sweeps empty rooms until ctx is done.
func (h *Hub) Run(ctx context.Context) {
	every := h.grace / 2
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	if every > 10*time.Second {
		every = 10 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.Sweep(now)
		}
	}
}

// Loaded finishes loading a room from the broker: seq is the room's latest
// seq and tail its latest messages in seq order (what the broker's history
// holds, at most the hub's history size). Joiners waiting on any loop are
// told to join again.
func (h *Hub) Loaded(name, epoch string, seq uint64, tail []broker.Entry) {
	r := h.lookup([]byte(name))
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loaded || r.closed {
		return
	}
	r.epoch = epoch
	for _, e := range tail {
		if e.Seq > r.seq {
			r.appendLocked(h.jsonMessage(e.Seq, e.Payload), 0, -1)
		}
	}
	r.seq = max(r.seq, seq)
	for _, m := range r.early {
		if m.Seq > r.seq {
			r.appendLocked(m, 0, -1)
		}
	}
	r.early = nil
	r.loaded = true
	close(r.loadedCh)
	r.wakeWaitingLocked()
}

// wakeWaitingLocked tells the loops whose joiners wait for the room that
// they may join now. The caller holds r.mu and the room is loaded.
func (r *Room) wakeWaitingLocked() {
	for i, w := range r.waiting {
		if w {
			r.waiting[i] = false
			r.hub.queues[i].push(Delivery{Room: r, Ready: true}, true)
		}
	}
}

// DeliverMany brings messages the broker ordered to this node's members of
// their rooms, each in turn, waking each event loop that got one once,
// after the last: a batch from the broker costs a loop one wake-up, not one
// a message. Messages at or below their room's seq are duplicates and
// dropped; a broker that sees a gap fills it (see Position) before
// delivering past it.
func (h *Hub) DeliverMany(msgs []broker.Delivered) {
	received := time.Now().UnixNano()
	for _, m := range msgs {
		h.deliver(m.Room, m.Seq, m.Payload, received)
	}
	for _, q := range h.queues {
		q.wakeIfPending()
	}
}

// quiet, as appendLocked's from, wakes no loop: the caller does.
const quiet = -2

// deliver is one message of DeliverMany, received being when the broker
// brought it (the processing time starts there); it wakes no loop.
func (h *Hub) deliver(name string, seq uint64, payload []byte, received int64) {
	r := h.lookup([]byte(name))
	if r == nil {
		return
	}
	m := h.jsonMessage(seq, payload)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
	case !r.loaded:
		r.early = append(r.early, m)
	case seq > r.seq:
		r.appendLocked(m, received, quiet)
	}
}

// PublishLocal gives a message the next seq of its room on this node and
// delivers it here: what a single node does with every message, and a
// cluster node while its broker is unreachable, so that its own members
// keep talking.
func (h *Hub) PublishLocal(p broker.Publication) (uint64, bool) {
	r := h.lookup([]byte(p.Room))
	if r == nil {
		return 0, false
	}
	return r.publishLocal(p)
}

// Position returns the epoch and latest seq of the room called name on
// this node, and whether the room is here and loaded ("" and 0 when it is
// not here).
func (h *Hub) Position(name string) (epoch string, seq uint64, loaded bool) {
	r := h.lookup([]byte(name))
	if r == nil {
		return "", 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch, r.seq, r.loaded && !r.closed
}

// PublishOwned orders and delivers on this node a message of a room the
// broker owns here from seq from, and hands it to keep, in seq order, for
// the broker to store; it reports false when the room does not order here
// now (see broker.OwnershipHandler).
func (h *Hub) PublishOwned(p broker.Publication, from uint64, keep func(room string, e broker.Entry)) (uint64, bool) {
	r := h.lookup([]byte(p.Room))
	if r == nil {
		return 0, false
	}
	return r.publishOwned(p, from, keep)
}

// LeaseRenewed tells the loops whose joiners wait in a loaded room (held
// back by the broker's JoinGate while its lease had lapsed: a loaded room
// holds joiners back for nothing else) that they may try again. Every room
// is looked at, each shard's lock, then each room's, one at a time: the
// broker calls it once a lapse, not once a lease.
func (h *Hub) LeaseRenewed() {
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		for _, r := range s.rooms {
			r.mu.Lock()
			if r.loaded {
				r.wakeWaitingLocked()
			}
			r.mu.Unlock()
		}
		s.mu.Unlock()
	}
}

// joinsWait reports whether the broker holds the joiners of the room
// called name back now (broker.JoinGate). Called under the room's lock.
func (h *Hub) joinsWait(name string) bool { return h.gate != nil && h.gate.JoinsWait(name) }

// Drop frees the room at once, members or not, and ends this node's
// ownership of it: its stream here can no longer be followed (another node
// took it over, or its owner is gone), or the node stops and hands it on.
// Its members are closed with 1012 (service restart), and come back to a
// room loaded anew. When keep is not nil it gets the room's epoch, latest
// seq and history, under the room's lock: what the room held when it was
// dropped, and nothing after (no message is ordered here after that seq).
// The broker is told to unsubscribe the room before Drop returns, in order
// with the room's other (un)subscriptions: a member that rejoins at once
// makes a new room, whose Subscribe comes after that. It reports whether
// the room was here.
func (h *Hub) Drop(name string, keep func(epoch string, seq uint64, tail []broker.Entry)) bool {
	s := h.shard([]byte(name))
	s.mu.Lock()
	r := s.rooms[name]
	if r == nil {
		s.mu.Unlock()
		return false
	}
	r.mu.Lock()
	if keep != nil && r.loaded {
		keep(r.epoch, r.seq, r.tailLocked())
	}
	h.freeLocked(s, r)
	r.forgetLocalLocked()
	for i, n := range r.local {
		if n > 0 || r.waiting[i] {
			h.queues[i].push(Delivery{Room: r, Dropped: true}, true)
		}
	}
	r.mu.Unlock()
	s.mu.Unlock()
	h.rooms.Add(-1)
	s.flush(h.broker)
	return true
}
