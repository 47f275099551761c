// Package broker connects the nodes of a scalechat cluster through Redis.
//
// Every message goes through one Lua script that, atomically, takes the
// room's next seq (INCR), appends the message to the room's capped history
// stream (XADD MAXLEN) and publishes it on the room's channel: Redis runs
// scripts one at a time, so every node receives a room's messages in seq
// order. A node subscribes to a room's channel only while it has members of
// the room, so no node reads traffic it does not need.
//
// When Redis is unreachable, each node goes on serving its own members
// alone (local seqs, local history) and /readyz reports it; when Redis is
// back, the node pushes each room's Redis counter above every seq it handed
// out, catches up what it missed, and cross-node delivery resumes.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/room"
)

// publishScript gives a message its seq, stores it and publishes it.
// KEYS: seq counter, history stream. ARGV: prefix, suffix, history size,
// TTL in seconds, channel.
var publishScript = redis.NewScript(`
local seq = redis.call('INCR', KEYS[1])
local msg = ARGV[1] .. seq .. ARGV[2]
if tonumber(ARGV[3]) > 0 then
  redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], seq .. '-1', 'm', msg)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('PUBLISH', ARGV[5], seq .. ' ' .. msg)
return seq
`)

// raiseScript pushes a room's counter up to at least ARGV[1] and returns
// the counter.
var raiseScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if want > cur then
  redis.call('SET', KEYS[1], want, 'EX', ARGV[2])
  return want
end
return cur
`)

// Config configures a Redis broker.
type Config struct {
	URL     string        // redis://[user:password@]host:port/db
	History int           // messages kept per room in Redis; 0 keeps none
	TTL     time.Duration // a room's keys expire after this long without messages
	Prefix  string        // of every key and channel
	Logger  *slog.Logger
}

// Stats counts the broker's traffic.
type Stats struct {
	Up          bool   // Redis answers
	Published   uint64 // messages sent to Redis
	Received    uint64 // messages received from Redis
	Errors      uint64 // failed Redis operations
	Local       uint64 // messages published on this node only, Redis being unreachable
	Gaps        uint64 // messages fetched from history because the channel missed them
	Unrecovered uint64 // seqs skipped because Redis no longer had them
	Rooms       int64  // rooms subscribed
	Reconnects  uint64
	LastError   string
}

type publication struct {
	room           string
	prefix, suffix []byte
}

type subCmd struct {
	room      string
	subscribe bool
}

// roomState is what the broker knows of a room this node subscribed to.
type roomState struct {
	confirmed chan struct{} // closed when Redis confirmed the subscription
	unsynced  bool          // loaded while Redis was down: its local seqs are not Redis's
}

// Redis is a broker backed by Redis.
type Redis struct {
	cfg Config
	log *slog.Logger
	hub *room.Hub
	rdb *redis.Client
	ps  *redis.PubSub

	pubMu   sync.Mutex
	pending []publication
	pubWake chan struct{}

	subMu   sync.Mutex
	subCmds []subCmd
	subWake chan struct{}
	rooms   map[string]*roomState // owned by the subscription goroutine, read under subMu
	self    [2]string             // name and URL to announce, under subMu

	announceWake chan struct{}
	fillMu       sync.Mutex // one catch-up at a time, never interleaved with a delivery

	up         atomic.Bool
	downSince  atomic.Int64
	upWake     chan struct{}
	published  atomic.Uint64
	received   atomic.Uint64
	errs       atomic.Uint64
	local      atomic.Uint64
	gaps       atomic.Uint64
	lost       atomic.Uint64
	reconnects atomic.Uint64
	lastErr    atomic.Pointer[string]
}

// New connects a broker to Redis for hub. It fails when the URL is invalid,
// not when Redis is down: a node starts degraded and joins the cluster when
// Redis answers.
func New(cfg Config, hub *room.Hub) (*Redis, error) {
	opts, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", cfg.URL, err)
	}
	opts.DialTimeout = time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	opts.MaxRetries = 0 // a failed publish falls back to local delivery at once
	opts.PoolSize = 8
	if cfg.Prefix == "" {
		cfg.Prefix = "scalechat"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rdb := redis.NewClient(opts)
	b := &Redis{
		cfg: cfg, log: cfg.Logger, hub: hub, rdb: rdb,
		pubWake: make(chan struct{}, 1), subWake: make(chan struct{}, 1), upWake: make(chan struct{}, 1),
		announceWake: make(chan struct{}, 1),
		rooms:        make(map[string]*roomState),
	}
	b.ps = rdb.Subscribe(context.Background())
	return b, nil
}

func (b *Redis) seqKey(room string) string     { return b.cfg.Prefix + ":{" + room + "}:seq" }
func (b *Redis) historyKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:history" }
func (b *Redis) channel(room string) string    { return b.cfg.Prefix + ":{" + room + "}:messages" }

func (b *Redis) roomOf(channel string) string {
	s := strings.TrimPrefix(channel, b.cfg.Prefix+":{")
	return strings.TrimSuffix(s, "}:messages")
}

// Up reports whether Redis answers.
func (b *Redis) Up() bool { return b.up.Load() }

// Stats returns the broker's counters.
func (b *Redis) Stats() Stats {
	b.subMu.Lock()
	n := len(b.rooms)
	b.subMu.Unlock()
	s := Stats{Up: b.up.Load(), Published: b.published.Load(), Received: b.received.Load(), Errors: b.errs.Load(),
		Local: b.local.Load(), Gaps: b.gaps.Load(), Unrecovered: b.lost.Load(), Rooms: int64(n), Reconnects: b.reconnects.Load()}
	if e := b.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Publish implements room.Broker. It never blocks: the message is sent by
// the publishing goroutine in a pipeline with every other pending one, or,
// while Redis is down, delivered on this node alone at once.
func (b *Redis) Publish(room string, prefix, suffix []byte) {
	if !b.up.Load() {
		b.local.Add(1)
		b.hub.PublishLocal(room, prefix, suffix)
		return
	}
	p := publication{room: room, prefix: append([]byte(nil), prefix...), suffix: append([]byte(nil), suffix...)}
	b.pubMu.Lock()
	b.pending = append(b.pending, p)
	b.pubMu.Unlock()
	signal(b.pubWake)
}

// Subscribe implements room.Broker.
func (b *Redis) Subscribe(room string) { b.queueSub(subCmd{room: room, subscribe: true}) }

// Unsubscribe implements room.Broker.
func (b *Redis) Unsubscribe(room string) { b.queueSub(subCmd{room: room}) }

func (b *Redis) queueSub(c subCmd) {
	b.subMu.Lock()
	b.subCmds = append(b.subCmds, c)
	b.subMu.Unlock()
	signal(b.subWake)
}

// Run works until ctx is done, then closes the Redis connections.
func (b *Redis) Run(ctx context.Context) error {
	if b.checkUp(ctx) {
		b.up.Store(true)
	}
	var wg sync.WaitGroup
	wg.Go(func() { b.publishLoop(ctx) })
	wg.Go(func() { b.receiveLoop(ctx) })
	wg.Go(func() { b.subscribeLoop(ctx) })
	wg.Go(func() { b.healthLoop(ctx) })
	wg.Go(func() { b.announceLoop(ctx) })
	<-ctx.Done()
	err := errors.Join(b.ps.Close(), b.rdb.Close())
	wg.Wait()
	b.flushLocal()
	return err
}

func (b *Redis) fail(op string, err error) {
	b.errs.Add(1)
	msg := op + ": " + err.Error()
	b.lastErr.Store(&msg)
	if b.up.CompareAndSwap(true, false) {
		b.downSince.Store(time.Now().UnixNano())
		b.log.Warn("redis unreachable: serving local members only", "op", op, "err", err)
		signal(b.upWake)
	}
}

func (b *Redis) checkUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		b.fail("ping", err)
		return false
	}
	if err := publishScript.Load(ctx, b.rdb).Err(); err != nil {
		b.fail("load script", err)
		return false
	}
	return true
}

// publishLoop sends pending publications to Redis, all at once in one
// pipeline per round.
func (b *Redis) publishLoop(ctx context.Context) {
	var batch []publication
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.pubWake:
		}
		b.pubMu.Lock()
		batch, b.pending = b.pending, batch[:0]
		b.pubMu.Unlock()
		if len(batch) > 0 {
			b.send(ctx, batch)
		}
		clear(batch)
	}
}

func (b *Redis) send(ctx context.Context, batch []publication) {
	hist := strconv.Itoa(b.cfg.History)
	ttl := strconv.Itoa(int(b.cfg.TTL / time.Second))
	cmds, _ := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range batch {
			publishScript.EvalSha(ctx, p, []string{b.seqKey(m.room), b.historyKey(m.room)},
				m.prefix, m.suffix, hist, ttl, b.channel(m.room))
		}
		return nil
	})
	var retry []publication
	for i, c := range cmds {
		err := c.Err()
		switch {
		case err == nil:
			b.published.Add(1)
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			retry = append(retry, batch[i])
		default:
			// Redis is gone, or refused: keep the conversation going here.
			b.fail("publish", err)
			b.local.Add(1)
			b.hub.PublishLocal(batch[i].room, batch[i].prefix, batch[i].suffix)
		}
	}
	for _, m := range retry { // Redis restarted and forgot the script
		err := publishScript.Run(ctx, b.rdb, []string{b.seqKey(m.room), b.historyKey(m.room)},
			m.prefix, m.suffix, hist, ttl, b.channel(m.room)).Err()
		if err != nil {
			b.fail("publish", err)
			b.local.Add(1)
			b.hub.PublishLocal(m.room, m.prefix, m.suffix)
			continue
		}
		b.published.Add(1)
	}
}

// flushLocal delivers locally what was still waiting for Redis at shutdown.
func (b *Redis) flushLocal() {
	b.pubMu.Lock()
	batch := b.pending
	b.pending = nil
	b.pubMu.Unlock()
	for _, m := range batch {
		b.hub.PublishLocal(m.room, m.prefix, m.suffix)
	}
}

// receiveLoop reads the subscribed channels and delivers their messages, in
// order, filling any gap from the room's history stream.
func (b *Redis) receiveLoop(ctx context.Context) {
	reconnected := false
	backoff := newBackoff()
	for ctx.Err() == nil {
		msg, err := b.ps.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			b.fail("receive", err)
			reconnected = true
			backoff.sleep(ctx)
			continue
		}
		backoff.reset()
		switch m := msg.(type) {
		case *redis.Message:
			b.onMessage(ctx, b.roomOf(m.Channel), m.Payload)
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			name := b.roomOf(m.Channel)
			b.subMu.Lock()
			st := b.rooms[name]
			b.subMu.Unlock()
			if st != nil {
				select {
				case <-st.confirmed:
					if reconnected { // resubscribed after a broken connection
						b.catchUp(ctx, name)
					}
				default:
					close(st.confirmed)
				}
			}
		}
	}
}

func (b *Redis) onMessage(ctx context.Context, name, payload string) {
	sp := strings.IndexByte(payload, ' ')
	if sp < 0 {
		b.errs.Add(1)
		return
	}
	seq, err := strconv.ParseUint(payload[:sp], 10, 64)
	if err != nil {
		b.errs.Add(1)
		return
	}
	b.received.Add(1)
	b.fillMu.Lock()
	defer b.fillMu.Unlock()
	if cur, loaded := b.hub.Seq(name); loaded && seq > cur+1 {
		b.fill(ctx, name, cur, seq-1)
	}
	b.hub.Deliver(name, seq, []byte(payload[sp+1:]))
}

// fill delivers the messages after seq from through to, from the room's
// history stream; those no longer there are skipped and counted. The caller
// holds fillMu.
func (b *Redis) fill(ctx context.Context, name string, from, to uint64) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	entries, err := b.rdb.XRange(ctx, b.historyKey(name), strconv.FormatUint(from+1, 10)+"-0", strconv.FormatUint(to, 10)+"-1").Result()
	if err != nil {
		b.fail("fetch history", err)
	}
	for _, e := range entries {
		seq, payload, ok := entry(e)
		if ok {
			b.gaps.Add(1)
			b.hub.Deliver(name, seq, []byte(payload))
		}
	}
	if cur, _ := b.hub.Seq(name); cur < to {
		b.lost.Add(to - cur)
		b.hub.Skip(name, to)
	}
}

// catchUp brings a room up to Redis after a broken subscription.
func (b *Redis) catchUp(ctx context.Context, name string) {
	b.fillMu.Lock()
	defer b.fillMu.Unlock()
	cur, loaded := b.hub.Seq(name)
	if !loaded {
		return
	}
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	seq, err := raiseScript.Run(c, b.rdb, []string{b.seqKey(name)}, cur, int(b.cfg.TTL/time.Second)).Uint64()
	cancel()
	if err != nil {
		b.fail("catch up", err)
		return
	}
	b.subMu.Lock()
	st := b.rooms[name]
	unsynced := st != nil && st.unsynced
	if st != nil {
		st.unsynced = false
	}
	b.subMu.Unlock()
	switch {
	case seq <= cur:
	case unsynced:
		// Loaded while Redis was down: what Redis holds predates every local
		// member, who saw other seqs meanwhile. Continue above it.
		b.hub.Skip(name, seq)
	default:
		b.fill(ctx, name, cur, seq)
	}
}

func entry(e redis.XMessage) (uint64, string, bool) {
	i := strings.IndexByte(e.ID, '-')
	if i < 0 {
		return 0, "", false
	}
	seq, err := strconv.ParseUint(e.ID[:i], 10, 64)
	p, ok := e.Values["m"].(string)
	return seq, p, err == nil && ok
}

// subscribeLoop subscribes and unsubscribes rooms in batches, and loads
// each newly subscribed room's seq and history tail.
func (b *Redis) subscribeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.subWake:
		}
		b.subMu.Lock()
		cmds := b.subCmds
		b.subCmds = nil
		b.subMu.Unlock()
		var subs, unsubs []string
		newRooms := map[string]*roomState{}
		for _, c := range cmds {
			ch := b.channel(c.room)
			if c.subscribe {
				st := &roomState{confirmed: make(chan struct{})}
				newRooms[c.room] = st
				b.subMu.Lock()
				b.rooms[c.room] = st
				b.subMu.Unlock()
				subs = append(subs, ch)
				continue
			}
			delete(newRooms, c.room)
			b.subMu.Lock()
			delete(b.rooms, c.room)
			b.subMu.Unlock()
			unsubs = append(unsubs, ch)
		}
		if len(unsubs) > 0 {
			if err := b.ps.Unsubscribe(ctx, unsubs...); err != nil && ctx.Err() == nil {
				b.fail("unsubscribe", err)
			}
		}
		if len(subs) > 0 {
			if err := b.ps.Subscribe(ctx, subs...); err != nil && ctx.Err() == nil {
				b.fail("subscribe", err)
			}
			b.load(ctx, newRooms)
		}
	}
}

// load waits for the subscriptions of rooms to be confirmed (so no message
// falls between the history read and the channel), then reads each room's
// seq and history tail in one pipeline. Without Redis, rooms load empty and
// unsynced, and serve their local members.
func (b *Redis) load(ctx context.Context, rooms map[string]*roomState) {
	ok := b.up.Load()
	if ok {
		timeout := time.After(2 * time.Second)
	wait:
		for _, st := range rooms {
			select {
			case <-st.confirmed:
			case <-timeout:
				ok = false
				break wait
			case <-ctx.Done():
				return
			}
		}
	}
	type read struct {
		seq  *redis.StringCmd
		tail *redis.XMessageSliceCmd
	}
	reads := map[string]read{}
	if ok {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
			for name := range rooms {
				r := read{seq: p.Get(c, b.seqKey(name))}
				if b.cfg.History > 0 {
					r.tail = p.XRevRangeN(c, b.historyKey(name), "+", "-", int64(b.cfg.History))
				}
				reads[name] = r
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			b.fail("load rooms", err)
			ok = false
		}
	}
	for name, st := range rooms {
		if !ok {
			b.subMu.Lock()
			st.unsynced = true
			b.subMu.Unlock()
			b.hub.Loaded(name, 0, nil)
			continue
		}
		r := reads[name]
		seq, _ := r.seq.Uint64() // redis.Nil: a new room, seq 0
		var tail []room.Entry
		if r.tail != nil {
			msgs := r.tail.Val()
			for i := len(msgs) - 1; i >= 0; i-- {
				if s, p, ok := entry(msgs[i]); ok {
					tail = append(tail, room.Entry{Seq: s, Payload: []byte(p)})
				}
			}
		}
		b.hub.Loaded(name, seq, tail)
	}
}

// healthLoop waits for Redis to come back after a failure, with backoff,
// then brings every room up to date.
func (b *Redis) healthLoop(ctx context.Context) {
	backoff := newBackoff()
	for {
		if b.up.Load() {
			select {
			case <-ctx.Done():
				return
			case <-b.upWake:
				continue
			}
		}
		if !backoff.sleep(ctx) {
			return
		}
		if !b.checkUp(ctx) {
			continue
		}
		backoff.reset()
		b.reconnects.Add(1)
		b.up.Store(true)
		b.log.Info("redis reachable again: resuming cross-node delivery",
			"after", time.Duration(time.Now().UnixNano()-b.downSince.Load()).Round(time.Millisecond))
		b.subMu.Lock()
		names := make([]string, 0, len(b.rooms))
		for name := range b.rooms {
			names = append(names, name)
		}
		b.subMu.Unlock()
		for _, name := range names {
			b.catchUp(ctx, name)
		}
	}
}

// backoff is an exponential backoff with full jitter, 50 ms to 5 s.
type backoff struct{ next time.Duration }

func newBackoff() backoff { return backoff{next: 50 * time.Millisecond} }

func (b *backoff) reset() { b.next = 50 * time.Millisecond }

// sleep waits for the next attempt and reports whether ctx is still live.
func (b *backoff) sleep(ctx context.Context) bool {
	d := time.Duration(rand.Int64N(int64(b.next))) + b.next/2
	b.next = min(b.next*2, 5*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// announceTTL is how long a node's announcement lives without a refresh.
const announceTTL = 10 * time.Second

// Announce makes this node known to the others as name, reachable at url
// (its metrics listener), refreshed every few seconds while Run runs.
func (b *Redis) Announce(name, url string) {
	b.subMu.Lock()
	b.self = [2]string{name, url}
	b.subMu.Unlock()
	signal(b.announceWake)
}

func (b *Redis) nodesKey() string { return b.cfg.Prefix + ":nodes" }

// announceLoop refreshes this node's announcement.
func (b *Redis) announceLoop(ctx context.Context) {
	t := time.NewTicker(announceTTL / 3)
	defer t.Stop()
	for {
		b.subMu.Lock()
		self := b.self
		b.subMu.Unlock()
		if self[0] != "" && b.up.Load() {
			c, cancel := context.WithTimeout(ctx, time.Second)
			exp := strconv.FormatInt(time.Now().Add(announceTTL).Unix(), 10)
			if err := b.rdb.HSet(c, b.nodesKey(), self[0], exp+" "+self[1]).Err(); err != nil && ctx.Err() == nil {
				b.fail("announce", err)
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.announceWake:
		}
	}
}

// Nodes returns the announced nodes whose announcement is alive: name to
// URL, this node included. Stale announcements are removed.
func (b *Redis) Nodes(ctx context.Context) (map[string]string, error) {
	all, err := b.rdb.HGetAll(ctx, b.nodesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("read cluster nodes: %w", err)
	}
	now := time.Now().Unix()
	nodes := make(map[string]string, len(all))
	var stale []string
	for name, v := range all {
		exp, url, ok := strings.Cut(v, " ")
		t, err := strconv.ParseInt(exp, 10, 64)
		if !ok || err != nil || t < now {
			stale = append(stale, name)
			continue
		}
		nodes[name] = url
	}
	if len(stale) > 0 {
		_ = b.rdb.HDel(ctx, b.nodesKey(), stale...).Err() // best effort: readers skip stale entries anyway
	}
	return nodes, nil
}
