package webhook

import (
	"context"
	_ "embed" // the Lua script
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/broker"
)

// redisLua is the cluster's webhook state and stream, in Redis.
//
//go:embed lua/webhook.lua
var redisLua string

// redisScript keeps the cluster's webhook state and appends its events,
// once each, to the webhook stream (lua/webhook.lua). go-redis loads it
// into a Redis that does not know it (EVALSHA, then EVAL).
var redisScript = redis.NewScript(redisLua)

// lease is how long a node's webhook lease lasts; it is renewed every
// third of it. A node whose lease ended has its connections removed.
const lease = 3 * time.Second

// wake signals c without blocking: one signal waiting is enough.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Webhooks across a cluster (docs/hooks.md, "Webhooks"; docs/cluster.md).
// Each node tells Redis its own connections per room and user, as absolute
// counts; redisScript (lua/webhook.lua) adds them up for the cluster and,
// in the same atomic step, appends an event to one stream only on a 0→1 or
// 1→0 transition: each event is decided once, in the order the changes
// reached Redis. A node whose lease ends has its counts removed, with their
// events, by the first node that sees it. One node at a time (a lease) is
// the dispatcher: it reads the stream after the committed cursor and moves
// the cursor only once the backend took the events.

// RedisConfig configures a cluster node's webhooks.
type RedisConfig struct {
	URL    string // as Config.URL
	Prefix string // of every key; "" is "scalechat"
	// MaxStream is how many events the stream holds unsent before new ones
	// are dropped (counted, logged); 0: 100000.
	MaxStream int
	// MaxStreamBytes bounds the stream in bytes too (what its entries
	// hold, messages included); 0: DefaultQueueBytes.
	MaxStreamBytes int64
	// MaxPending is how many changes wait on this node (Redis unreachable)
	// before they are given up for a full resync; 0: 100000.
	MaxPending int
	// MaxPendingBytes bounds them in bytes too; 0: DefaultQueueBytes.
	MaxPendingBytes int64
	Logger          *slog.Logger
}

// Redis is a cluster node's Tracker and Source.
type Redis struct {
	cfg  RedisConfig
	rdb  redis.UniversalClient
	id   string
	keys []string // redisScript's KEYS, KEYS[7] this node's

	mu           sync.Mutex
	state        map[string]map[string]int // room → user → this node's connections
	pending      []whItem                  // changes not yet in Redis, in order
	pendingBytes int64                     // what pending holds (whItem.size)
	gen          uint64                    // bumped when pending is given up
	resync       bool                      // Redis must get the whole state
	givenUp      int                       // messages given up with pending: the resync tells Redis, which counts them in a dropped event
	wake         chan struct{}

	leadMu   sync.Mutex
	leader   bool
	cursor   string // the last entry the backend took
	leadWake chan struct{}

	dropped atomic.Uint64
	errs    rateLog
}

// whItem is one change for redisScript: 'p' (a, b: user, count) or 'm'
// (a, b: seq, message).
type whItem struct {
	kind    byte
	room    string
	a, b    string
	payload []byte
}

var (
	_ Tracker = (*Redis)(nil)
	_ Source  = (*Redis)(nil)
)

// NewRedis returns a node's webhooks on the Redis (or Redis
// Cluster) at cfg.URL. It fails only on a bad URL.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	rdb, err := newWebhookClient(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "scalechat"
	}
	queueBounds(&cfg.MaxStream, &cfg.MaxPending, &cfg.MaxStreamBytes, &cfg.MaxPendingBytes)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Redis{cfg: cfg, rdb: rdb, id: broker.NewEpoch(), state: map[string]map[string]int{},
		wake: make(chan struct{}, 1), leadWake: make(chan struct{}, 1), cursor: "0"}
	w.keys = w.keysFor(w.id)
	return w, nil
}

func newWebhookClient(url string) (redis.UniversalClient, error) {
	if broker.IsClusterURL(url) {
		opts, err := broker.ParseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis cluster URL %q: %w", url, err)
		}
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", url, err)
	}
	opts.DialTimeout = time.Second
	opts.ReadTimeout = 3 * time.Second // above XREAD's block
	opts.WriteTimeout = 2 * time.Second
	opts.MaxRetries = -1 // none (0 is go-redis's default, 3): a script run twice would count a change twice
	opts.PoolSize = 4
	return redis.NewClient(opts), nil
}

// keysFor returns redisScript's KEYS with node's hash as KEYS[7]. One hash
// tag: a Redis Cluster keeps them in one slot, so one script sees them all.
func (w *Redis) keysFor(node string) []string {
	p := w.cfg.Prefix + ":{webhooks}:"
	return []string{p + "epoch", p + "stream", p + "nodes", p + "rooms", p + "members", p + "users",
		p + "node:" + node, p + "dropped", p + "dispatcher", p + "cursor", p + "gap", p + "bytes"}
}

// ID returns the node's name in the webhook state.
func (w *Redis) ID() string { return w.id }

// Presence implements Tracker.
func (w *Redis) Presence(room, user string, count int) {
	w.mu.Lock()
	setCount(w.state, room, user, count)
	w.pushLocked(whItem{kind: 'p', room: room, a: user, b: strconv.Itoa(count)})
	w.mu.Unlock()
	wake(w.wake)
}

// Published implements Tracker.
func (w *Redis) Published(room string, seq uint64, message []byte) {
	w.mu.Lock()
	w.pushLocked(whItem{kind: 'm', room: room, a: strconv.FormatUint(seq, 10), payload: message})
	w.mu.Unlock()
	wake(w.wake)
}

// size is what a change holds waiting, roughly.
func (it *whItem) size() int64 {
	return int64(len(it.room)+len(it.a)+len(it.b)+len(it.payload)) + 96
}

// pushLocked queues it, or, when MaxPending changes (or MaxPendingBytes)
// wait already (Redis has been unreachable a while), gives them all up for
// a resync of the whole state: the backend then gets where things are, not
// every step on the way, and the published messages among them are lost
// (counted, and told to the backend in a dropped event).
func (w *Redis) pushLocked(it whItem) {
	if len(w.pending) < w.cfg.MaxPending && (len(w.pending) == 0 || w.pendingBytes+it.size() <= w.cfg.MaxPendingBytes) {
		w.pending = append(w.pending, it)
		w.pendingBytes += it.size()
		return
	}
	n := 0
	for _, p := range w.pending {
		if p.kind == 'm' {
			n++
		}
	}
	if it.kind == 'm' {
		n++
	}
	w.dropped.Add(uint64(n))
	w.givenUp += n
	w.errs.warn(w.cfg.Logger, "webhook changes given up: Redis unreachable too long; the node sends its whole state when it is back",
		"pending", len(w.pending), "messages_dropped", n)
	w.pending, w.pendingBytes, w.resync = nil, 0, true
	w.gen++
}

// Run works until ctx is done: it sends the node's changes to Redis, keeps
// its lease, removes dead nodes' counts and takes the dispatcher's lease
// when free. Stopping, it sends what is left and removes its own counts.
func (w *Redis) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.flushLoop(ctx) })
	wg.Go(func() { w.tickLoop(ctx) })
	wg.Wait()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for w.flush(c) { // what the node's last connections did
	}
	if _, err := w.run(c, w.keys, "leave", w.id, nil); err != nil {
		w.cfg.Logger.Info("webhook state not cleared at stop: the node's lease ends instead", "err", err)
	}
	_ = w.rdb.Close()
}

func (w *Redis) flushLoop(ctx context.Context) {
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
		left := len(w.pending) > 0 || w.resync
		w.mu.Unlock()
		if left { // Redis failed: try again after a pause
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

// flush sends one batch of changes (or the whole state) to Redis and
// reports whether it did and there is more.
func (w *Redis) flush(ctx context.Context) bool {
	w.mu.Lock()
	gen, resync, givenUp := w.gen, w.resync, w.givenUp
	var args []any
	n := 0
	if resync { // the state holds every change pending so far
		n = len(w.pending)
		if givenUp > 0 {
			args = append(args, "d", "", strconv.Itoa(givenUp), "")
		}
		for room, users := range w.state {
			for u, c := range users {
				args = append(args, "p", room, u, strconv.Itoa(c))
			}
		}
		for _, it := range w.pending {
			if it.kind == 'm' { // messages are not in the state: they go after it
				args = append(args, "m", it.room, it.a, it.payload)
			}
		}
	} else {
		n = min(len(w.pending), 256)
		for _, it := range w.pending[:n] {
			if it.kind == 'm' {
				args = append(args, "m", it.room, it.a, it.payload)
			} else {
				args = append(args, "p", it.room, it.a, it.b)
			}
		}
	}
	w.mu.Unlock()
	if !resync && n == 0 {
		return false
	}
	op := "apply"
	if resync {
		op = "sync"
	}
	res, err := w.run(ctx, w.keys, op, w.id, args)
	if err != nil {
		if ctx.Err() == nil {
			w.errs.warn(w.cfg.Logger, "webhook changes not sent to Redis: sending them again", "err", err)
		}
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if res[0] == -1 { // Redis forgot this node: send it all
		w.resync = true
		return true
	}
	if resync {
		w.givenUp -= givenUp // Redis counted them
	}
	if gen == w.gen {
		for i := range w.pending[:n] {
			w.pendingBytes -= w.pending[i].size()
		}
		w.pending = w.pending[n:]
		if resync {
			w.resync = false
		}
	}
	return len(w.pending) > 0 || w.resync
}

// run calls redisScript and counts the events it dropped.
func (w *Redis) run(ctx context.Context, keys []string, op, node string, items []any) ([]int64, error) {
	args := append([]any{op, node, int(lease / time.Millisecond), w.cfg.MaxStream, broker.NewEpoch(), w.cfg.MaxStreamBytes}, items...)
	v, err := redisScript.Run(ctx, w.rdb, keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("webhook script %s: %w", op, err)
	}
	res := make([]int64, 0, 3)
	for _, x := range v {
		if n, ok := x.(int64); ok {
			res = append(res, n)
		}
	}
	if op == "lead" || op == "commit" {
		return res, nil
	}
	if len(res) < 3 {
		return nil, fmt.Errorf("webhook script %s answered %v", op, v)
	}
	if res[2] > 0 {
		w.dropped.Add(uint64(res[2]))
		w.errs.warn(w.cfg.Logger, "webhook events dropped: the cluster's stream is full (the backend is slow or down)", "dropped", res[2])
	}
	if op == "renew" {
		for _, x := range v[3:] {
			if dead, ok := x.(string); ok {
				w.gone(ctx, dead)
			}
		}
	}
	return res, nil
}

// gone removes a dead node's counts (their events with them); the script
// checks again, in the same step, that its lease ended.
func (w *Redis) gone(ctx context.Context, node string) {
	if _, err := w.run(ctx, w.keysFor(node), "gone", node, nil); err != nil {
		w.errs.warn(w.cfg.Logger, "a dead node's webhook state not removed: tried again at the next renewal", "node", node, "err", err)
		return
	}
	w.cfg.Logger.Info("a node's lease ended: its connections left, in the webhooks too", "node", node)
}

func (w *Redis) tickLoop(ctx context.Context) {
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		w.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick renews the node's lease (or asks for a resync when Redis forgot the
// node), removes dead nodes, and takes or keeps the dispatcher's lease.
func (w *Redis) tick(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if res, err := w.run(c, w.keys, "renew", w.id, nil); err == nil && res[0] == -1 {
		w.mu.Lock()
		w.resync = true
		w.mu.Unlock()
		wake(w.wake)
	}
	v, err := redisScript.Run(c, w.rdb, w.keys, "lead", w.id, int(lease/time.Millisecond), w.cfg.MaxStream, "", w.cfg.MaxStreamBytes).Slice()
	w.leadMu.Lock()
	defer w.leadMu.Unlock()
	was := w.leader
	w.leader = err == nil && len(v) == 2 && v[0] == int64(1)
	if !w.leader {
		return
	}
	cursor, _ := v[1].(string)
	switch {
	case !was:
		w.cursor = cursor
		w.cfg.Logger.Info("this node is the cluster's webhook dispatcher", "node", w.id, "cursor", w.cursor)
		wake(w.leadWake)
	case cursor == "0" && w.cursor != "0":
		// Redis lost the cursor (and the stream) while this node held
		// the lease: read the new stream from its start.
		w.cursor = cursor
	}
}

// Next implements Source: while this node is the dispatcher, it
// reads the stream after the cursor.
func (w *Redis) Next(ctx context.Context, max int) ([]Event, error) {
	for {
		w.leadMu.Lock()
		leader, cursor := w.leader, w.cursor
		w.leadMu.Unlock()
		if !leader {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-w.leadWake:
			}
			continue
		}
		streams, err := w.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{w.keys[1], cursor}, Count: int64(max), Block: time.Second}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the webhook stream: %w", err)
		}
		var evs []Event
		for _, s := range streams {
			for _, m := range s.Messages {
				evs = append(evs, streamEvent(m))
			}
		}
		if len(evs) > 0 {
			return evs, nil
		}
	}
}

// streamEvent makes the webhook event of a stream entry; its ID is the
// epoch and the entry's ID, the same whichever node sends it.
func streamEvent(m redis.XMessage) Event {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	e := Event{Name: s("name"), Epoch: s("epoch"), Room: s("room"), User: s("user"), Node: s("node")}
	e.ID = e.Epoch + ":" + m.ID
	e.TimeMS, _ = strconv.ParseInt(s("time"), 10, 64)
	e.Seq, _ = strconv.ParseUint(s("seq"), 10, 64)
	e.Count, _ = strconv.ParseUint(s("count"), 10, 64)
	if msg := s("msg"); msg != "" {
		e.Message = []byte(msg)
	}
	return e
}

// Commit implements Source: the cursor moves (and the stream is
// trimmed up to it) only while this node holds the dispatcher's lease.
func (w *Redis) Commit(ctx context.Context, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	id := evs[len(evs)-1].ID
	id = id[strings.LastIndexByte(id, ':')+1:]
	res, err := w.run(ctx, w.keys, "commit", w.id, []any{id})
	if err != nil {
		return err
	}
	w.leadMu.Lock()
	defer w.leadMu.Unlock()
	if len(res) == 0 || res[0] != 1 {
		w.leader = false
		return ErrNotDispatcher
	}
	w.cursor = id
	return nil
}

// Stats implements Source.
func (w *Redis) Stats() Stats {
	w.mu.Lock()
	q, b := len(w.pending), w.pendingBytes
	w.mu.Unlock()
	return Stats{Queued: int64(q), QueuedBytes: b, Dropped: w.dropped.Load()}
}

// rateLog writes a warning at most once every ten seconds.
type rateLog struct {
	mu   sync.Mutex
	last time.Time
}

func (r *rateLog) warn(log *slog.Logger, msg string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.last) >= 10*time.Second {
		log.Warn(msg, args...)
		r.last = now
	}
}
