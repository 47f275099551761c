package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/scalechat/scalechat/internal/broker"
)

// Webhooks across a cluster on NATS with JetStream (docs/hooks.md,
// "Webhooks"; docs/nats.md). What Redis's script does in one atomic step
// is split here between an ordered log and one reader of it:
//
//   - The changes: each node appends its own changes, in order, to one
//     stream, <name>_webhooks (subject <prefix>.webhooks; natsChange):
//     its absolute count of each user's connections in each room, and the
//     messages published, stamped with its node id and incarnation (its
//     lease's value). A node starts, and comes back after its lease ended,
//     with a sync: its whole state, which zeroes what it does not name.
//     The stream is bounded (MaxStream messages, MaxStreamBytes, discard
//     new): a change it refuses is dropped, counted, and told to the
//     backend in a Dropped event ahead of the node's next sync.
//   - The leases: <name>_whnodes, a bucket whose MaxAge is the lease
//     (NATSConfig.NATS.Lease, default broker.DefaultNATSLease, 10 s:
//     longer than a JetStream election), holds a key per live node (its
//     incarnation), renewed every quarter of it by compare-and-set, and
//     the key "dispatcher": the node that holds it, by create and
//     compare-and-set, is the cluster's one dispatcher.
//   - The decisions: the dispatcher reads the stream in order (an ordered
//     consumer) and applies each change to the cluster's sums (natsTally):
//     an event only on a 0→1 or 1→0 transition of a room's, a member's or
//     a user's total, so each is decided once, in the stream's order. An
//     event's ID is the epoch, the change's stream seq and its index among
//     the change's events: whoever replays the change decides the same
//     events with the same IDs.
//   - The position: <name>_whcounts holds the cursor (the epoch; the base,
//     the last stream seq whose events the backend took; and how many of
//     the next change's events it took) and, as of the base, every node's
//     counts (key <room>.<node>.<user>) and incarnation (n.<node>). A
//     commit, once the backend took events, writes the slots that changed
//     up to the new base, then the cursor by compare-and-set, then trims
//     the stream below the base. A new dispatcher loads the counts as of
//     the cursor's base and replays the stream after it: it needs no
//     older part of the stream, and the events the backend did not yet
//     take are decided again, the same. A slot written by a dispatcher
//     that died before its cursor carries its value before (natsStored).
//   - Dead nodes: the dispatcher, every quarter lease, appends a gone
//     change for each node whose lease key is gone (or names another
//     incarnation); applied, it removes that incarnation's counts with
//     their events. A node that finds its lease gone (its renewal's
//     compare-and-set fails) comes back as a new incarnation with a sync.
//   - A new epoch (no cursor: the first start, or NATS lost the state):
//     the dispatcher purges the stream and the counts, appends an epoch
//     change (a Reset when applied) and writes the cursor. Each node reads
//     the cursor's epoch at each renewal: a new one, it sends its whole
//     state again, after the epoch's change. A node that knows no epoch
//     yet (a cluster's first start) holds its changes until it does.
//
// Guaranteed: each transition decided once per epoch; events in the
// stream's order, at least once (a dispatcher that dies before its commit
// has the next one send them again, same IDs); a dead node's counts
// removed once its lease ended; drops counted and told. Not guaranteed:
//   - a dispatcher paused (not merely cut off: its connection buffers
//     nothing while disconnected) for longer than the lease margin between
//     checking its lease and writing may write slots after its successor
//     started (the cursor's compare-and-set refuses its cursor, not those
//     slots);
//   - a node killed loses the changes it had not appended (its messages'
//     events without a Dropped event: the node that counted them is gone);
//   - NATS losing the cursor (a server restarted without its store, R1)
//     loses what the stream held unsent: the new epoch's Reset says so.
//
// The files: nats.go (the node: its changes), nats_lease.go (its lease,
// the dispatcher's, the gone nodes), nats_dispatch.go (the dispatcher:
// Next, Commit, the cursor), nats_tally.go (the changes and the tally that
// decides the events, with no I/O).

// NATSConfig configures a cluster node's webhooks on NATS.
type NATSConfig struct {
	// NATS is the connection (URL, authentication, TLS, as the broker's),
	// the streams' and buckets' Prefix and Replicas, and Lease: how long
	// a node's and the dispatcher's leases live unrenewed (0:
	// broker.DefaultNATSLease).
	NATS broker.NATSConfig
	// MaxStream is how many change messages (each a batch of one node's
	// changes) the stream holds before new ones are dropped (counted,
	// logged); 0: 100000.
	MaxStream int
	// MaxStreamBytes bounds the stream in bytes too; 0: DefaultQueueBytes.
	MaxStreamBytes int64
	// MaxPending is how many changes wait on this node (NATS unreachable)
	// before they are given up for a full resync; 0: 100000.
	MaxPending int
	// MaxPendingBytes bounds them in bytes too; 0: DefaultQueueBytes.
	MaxPendingBytes int64
	Logger          *slog.Logger
}

// NATS is a cluster node's Tracker and Source on NATS: the node's changes
// go to the cluster's stream; while it holds the dispatcher's lease it
// decides the events and is the Source of its Dispatcher.
type NATS struct {
	cfg     NATSConfig
	log     *slog.Logger
	id      string
	lease   time.Duration
	nc      *nats.Conn
	js      jetstream.JetStream
	leases  jetstream.KeyValue // <name>_whnodes
	counts  jetstream.KeyValue // <name>_whcounts
	stream  string             // <name>_webhooks
	subject string             // <prefix>.webhooks
	bucket  string             // the counts bucket's name

	mu           sync.Mutex
	state        map[string]map[string]int // room → user → this node's connections
	pending      []natsItem                // changes not yet in a message, in order
	pendingBytes int64
	out          []natsOut // messages made, to append in order (one apply, or a sync's parts)
	resync       bool      // the next message is a sync
	givenUp      uint64    // changes dropped, not yet told in a sync
	inc          string    // this node's incarnation: its lease's value
	epoch        string    // the cursor's epoch, as last read
	synced       string    // the epoch known when the last sync was made
	leaseRev     uint64    // its lease key's revision; 0: none
	msgs         uint64    // numbers the messages' ids
	wake         chan struct{}

	lmu      sync.Mutex
	dispRev  uint64    // the dispatcher key's revision while this node holds it
	until    time.Time // when the dispatcher's lease lapses by this node's clock
	term     uint64    // bumped each time this node takes the dispatcher's lease, or loses it
	incs     map[string]string
	goneSent map[string]bool // gone changes appended, by node and incarnation
	leadWake chan struct{}

	dmu sync.Mutex
	d   natsDispatch // the dispatcher's state: Next and Commit's

	dropped atomic.Uint64
	errs    rateLog
}

// natsOut is a message made from changes, sent until the stream takes or
// refuses it (the same id: JetStream keeps one of two sent).
type natsOut struct {
	id      string
	data    []byte
	changes uint64 // what is dropped if the stream refuses it: an apply's items, a sync's messages
	told    uint64 // givenUp that it tells
}

// natsLeaseMargin is how long before its lease can expire the dispatcher
// stops committing: the renewal's round trip and the clocks' drift.
const natsLeaseMargin = 500 * time.Millisecond

// natsDispatcherKey is the dispatcher's lease key in the leases' bucket
// (node ids are 12 characters).
const natsDispatcherKey = "dispatcher"

var (
	_ Tracker = (*NATS)(nil)
	_ Source  = (*NATS)(nil)
)

// NewNATS connects to the NATS servers of cfg.NATS, opens the stream and
// buckets (made when missing), takes this node's lease and returns its
// webhooks. It fails when the servers cannot be reached or have no
// JetStream.
func NewNATS(cfg NATSConfig) (*NATS, error) {
	if cfg.NATS.Prefix == "" {
		cfg.NATS.Prefix = "scalechat"
	}
	if cfg.NATS.Replicas == 0 {
		cfg.NATS.Replicas = 1
	}
	if cfg.NATS.Lease <= 0 {
		cfg.NATS.Lease = broker.DefaultNATSLease
	}
	queueBounds(&cfg.MaxStream, &cfg.MaxPending, &cfg.MaxStreamBytes, &cfg.MaxPendingBytes)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	name := strings.ReplaceAll(cfg.NATS.Prefix, ".", "_")
	w := &NATS{cfg: cfg, log: cfg.Logger, id: broker.NewEpoch(), lease: cfg.NATS.Lease,
		stream: name + "_webhooks", subject: cfg.NATS.Prefix + ".webhooks", bucket: name + "_whcounts",
		state: map[string]map[string]int{}, resync: true, wake: make(chan struct{}, 1),
		leadWake: make(chan struct{}, 1), goneSent: map[string]bool{}}
	// Nothing buffered while disconnected: a write the dispatcher sent
	// before it lost its lease must not land after its successor's.
	nc, err := broker.ConnectNATS(cfg.NATS, "scalechat-webhooks-"+w.id, nats.ReconnectBufSize(-1))
	if err != nil {
		return nil, err
	}
	w.nc = nc
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open JetStream on NATS: %w", err)
	}
	w.js = js
	if w.leases, w.counts, err = w.open(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	if err := w.renew(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	w.checkEpoch(ctx)
	return w, nil
}

// open makes (or opens) the stream and the buckets and returns the
// buckets. Called again when NATS lost them, it makes them again; the
// handles already held name them, and go on.
func (w *NATS) open(ctx context.Context) (leases, counts jetstream.KeyValue, err error) {
	js, r := w.js, w.cfg.NATS.Replicas
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: w.stream, Subjects: []string{w.subject}, Storage: jetstream.FileStorage, Replicas: r,
		MaxMsgs: int64(w.cfg.MaxStream), MaxBytes: w.cfg.MaxStreamBytes, Discard: jetstream.DiscardNew,
		Duplicates: 2 * time.Minute,
	}); err != nil {
		return nil, nil, fmt.Errorf("open the webhooks' stream %s: %w", w.stream, err)
	}
	name := strings.TrimSuffix(w.stream, "_webhooks")
	if leases, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: name + "_whnodes", History: 1, Replicas: r, Storage: jetstream.FileStorage, TTL: w.lease,
	}); err != nil {
		return nil, nil, fmt.Errorf("open the webhooks' leases bucket %s_whnodes: %w", name, err)
	}
	if counts, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: w.bucket, History: 1, Replicas: r, Storage: jetstream.FileStorage,
	}); err != nil {
		return nil, nil, fmt.Errorf("open the webhooks' counts bucket %s: %w", w.bucket, err)
	}
	return leases, counts, nil
}

// lostState reports whether err says NATS lost a stream or bucket (a
// server restarted without its store): open makes them again.
func lostState(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse)
}

// ID returns the node's name in the webhook state.
func (w *NATS) ID() string { return w.id }

// Presence implements Tracker.
func (w *NATS) Presence(room, user string, count int) {
	w.mu.Lock()
	setCount(w.state, room, user, count)
	w.pushLocked(natsItem{Room: room, User: user, Count: max(count, 0)})
	w.mu.Unlock()
	wake(w.wake)
}

// Published implements Tracker.
func (w *NATS) Published(room string, seq uint64, message []byte) {
	w.mu.Lock()
	w.pushLocked(natsItem{Room: room, Seq: seq, Msg: message})
	w.mu.Unlock()
	wake(w.wake)
}

// pushLocked queues it, or, when MaxPending changes (or MaxPendingBytes)
// wait already (NATS unreachable a while), gives them all up for a resync
// of the whole state: the backend then gets where things are, not every
// step on the way; the changes given up are counted, and told to it in a
// Dropped event.
func (w *NATS) pushLocked(it natsItem) {
	if len(w.pending) < w.cfg.MaxPending && (len(w.pending) == 0 || w.pendingBytes+it.size() <= w.cfg.MaxPendingBytes) {
		w.pending = append(w.pending, it)
		w.pendingBytes += it.size()
		return
	}
	n := uint64(len(w.pending) + 1)
	w.dropped.Add(n)
	w.givenUp += n
	w.errs.warn(w.log, "webhook changes given up: NATS unreachable too long; the node sends its whole state when it is back", "dropped", n)
	w.pending, w.pendingBytes, w.resync = nil, 0, true
}

// Run works until ctx is done: it appends the node's changes to the
// stream, keeps its lease, takes the dispatcher's lease when free and,
// while it holds it, appends a gone change for each dead node. Stopping, it
// appends what is left and its leave, and lets its leases go.
func (w *NATS) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.flushLoop(ctx) })
	wg.Go(func() { w.tickLoop(ctx) })
	wg.Wait()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for w.flush(c) { // what the node's last connections did
	}
	w.mu.Lock()
	inc, rev := w.inc, w.leaseRev
	w.mu.Unlock()
	if err := w.appendChange(c, &natsChange{Op: natsOpLeave, Node: w.id, Inc: inc}, ""); err != nil {
		w.log.Info("webhook state not cleared at stop: the node's lease ends instead", "err", err)
	} else if rev != 0 {
		_ = w.leases.Delete(c, w.id, jetstream.LastRevision(rev))
	}
	w.lmu.Lock()
	if w.dispRev != 0 { // the next dispatcher need not wait for the lease to end
		_ = w.leases.Delete(c, natsDispatcherKey, jetstream.LastRevision(w.dispRev))
		w.dispRev = 0
		w.term++
	}
	w.lmu.Unlock()
	wake(w.leadWake)
	w.nc.Close()
}

func (w *NATS) flushLoop(ctx context.Context) {
	wait := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		for w.flush(ctx) {
		}
		w.mu.Lock()
		left := len(w.out) > 0 || len(w.pending) > 0 || w.resync
		w.mu.Unlock()
		if left { // NATS failed, the stream is full, or no epoch yet: try again after a pause
			if !sleep(ctx, wait) {
				return
			}
			wait = min(2*wait, 2*time.Second)
			wake(w.wake)
		} else {
			wait = 50 * time.Millisecond
		}
	}
}

// maxMessage is the most bytes of changes one message holds: well under
// the servers' max payload.
func (w *NATS) maxMessage() int {
	return int(min(max(w.nc.MaxPayload()/2, 1024), 256<<10))
}

// flush appends the next message made of the node's changes and reports
// whether it did and there is more. A message the stream refuses (full)
// is dropped, counted, and the node resyncs.
func (w *NATS) flush(ctx context.Context) bool {
	w.mu.Lock()
	if w.epoch == "" { // no dispatcher yet: a new epoch would purge what is appended now
		w.mu.Unlock()
		w.checkEpoch(ctx)
		w.mu.Lock()
		if w.epoch == "" {
			w.mu.Unlock()
			return false
		}
	}
	if len(w.out) == 0 {
		w.makeLocked()
	}
	if len(w.out) == 0 {
		w.mu.Unlock()
		return false
	}
	m := w.out[0]
	w.mu.Unlock()
	_, err := w.js.Publish(ctx, w.subject, m.data, jetstream.WithMsgID(m.id), jetstream.WithExpectStream(w.stream))
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.givenUp -= m.told
		w.out = w.out[1:]
		return len(w.out) > 0 || len(w.pending) > 0 || w.resync
	case refused(err):
		var n uint64
		for _, o := range w.out { // an apply, or a sync's parts: the sync is void
			n += o.changes
		}
		w.out = nil
		w.dropped.Add(n)
		w.givenUp += n
		w.resync = true
		w.errs.warn(w.log, "webhook changes dropped: the cluster's stream is full (the backend is slow or down)", "dropped", n, "err", err)
	default:
		if ctx.Err() == nil {
			w.errs.warn(w.log, "webhook changes not appended to the NATS stream: sending them again", "err", err)
		}
		if lostState(err) {
			_, _, _ = w.open(ctx)
		}
	}
	return false
}

// refused reports whether the stream refused a message for good: full
// (discard new), or the message too large.
func refused(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum ||
			api.ErrorCode == 10077 && strings.Contains(api.Description, "maximum") // JSStreamStoreFailedF: max msgs, bytes, too large
	}
	return errors.Is(err, nats.ErrMaxPayload)
}

// makeLocked makes the next messages: a sync's parts when one is due (the
// whole state, then the messages waiting), else an apply of the changes
// waiting.
func (w *NATS) makeLocked() {
	limit := w.maxMessage()
	var parts []*natsChange
	var changes []uint64
	add := func(c *natsChange, it natsItem, counted bool) {
		if len(parts) == 0 || len(parts[len(parts)-1].Items) >= 256 || partSize(parts[len(parts)-1])+it.size() > int64(limit) {
			parts = append(parts, c)
			changes = append(changes, 0)
		}
		p := parts[len(parts)-1]
		p.Items = append(p.Items, it)
		if counted {
			changes[len(changes)-1]++
		}
	}
	if w.resync {
		newPart := func() *natsChange { return &natsChange{Op: natsOpSync, Node: w.id, Inc: w.inc} }
		for room, users := range w.state {
			for u, n := range users {
				add(newPart(), natsItem{Room: room, User: u, Count: n}, false)
			}
		}
		for _, it := range w.pending { // the messages after the state that holds every change
			if len(it.Msg) > 0 {
				add(newPart(), it, true)
			}
		}
		if len(parts) == 0 {
			parts, changes = []*natsChange{newPart()}, []uint64{0}
		}
		parts[0].Begin, parts[0].Dropped = true, w.givenUp
		parts[len(parts)-1].End = true
		w.pending, w.pendingBytes, w.resync, w.synced = nil, 0, false, w.epoch
	} else {
		n := 0
		c := &natsChange{Op: natsOpApply, Node: w.id, Inc: w.inc}
		for _, it := range w.pending {
			if n > 0 && (len(c.Items) >= 256 || partSize(c)+it.size() > int64(limit)) {
				break
			}
			c.Items = append(c.Items, it)
			w.pendingBytes -= it.size()
			n++
		}
		if n == 0 {
			return
		}
		w.pending = append(w.pending[:0:0], w.pending[n:]...)
		parts, changes = []*natsChange{c}, []uint64{uint64(n)}
	}
	for i, p := range parts {
		data, err := json.Marshal(p)
		if err != nil { // a message that is not JSON: it cannot be an event either
			w.log.Warn("a webhook change could not be encoded: dropped", "err", err)
			w.dropped.Add(changes[i])
			continue
		}
		w.msgs++
		o := natsOut{id: w.id + "-" + w.inc + "-" + strconv.FormatUint(w.msgs, 10), data: data, changes: changes[i]}
		if p.Begin {
			o.told = p.Dropped
		}
		w.out = append(w.out, o)
	}
}

// partSize is what a change's items hold, roughly.
func partSize(c *natsChange) int64 {
	var n int64 = 128
	for i := range c.Items {
		n += c.Items[i].size()
	}
	return n
}

// appendChange appends one change made here (a leave, a gone), with id
// as its message id when not empty.
func (w *NATS) appendChange(ctx context.Context, c *natsChange, id string) error {
	_, err := w.appendChangeSeq(ctx, c, id)
	return err
}

// appendChangeSeq is appendChange, returning the change's stream seq.
func (w *NATS) appendChangeSeq(ctx context.Context, c *natsChange, id string) (uint64, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return 0, err
	}
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(w.stream)}
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ack, err := w.js.Publish(ctx, w.subject, data, opts...)
	if err != nil {
		return 0, fmt.Errorf("append a webhook %s change: %w", c.Op, err)
	}
	return ack.Sequence, nil
}

// Stats implements Source.
func (w *NATS) Stats() Stats {
	w.mu.Lock()
	q, b := int64(len(w.pending)), w.pendingBytes
	for _, o := range w.out {
		q += int64(o.changes)
		b += int64(len(o.data))
	}
	w.mu.Unlock()
	return Stats{Queued: q, QueuedBytes: b, Dropped: w.dropped.Load()}
}
