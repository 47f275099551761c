// The Redis broker: every message goes through one Lua script that,
// atomically, takes the room's next seq (INCR), appends the message to the
// room's capped history stream (XADD MAXLEN) and publishes it on the room's
// channel. Redis runs scripts one at a time, so every node receives a room's
// messages in seq order. A node subscribes to a room's channel only while it
// has members of the room, so no node reads traffic it does not need.
//
// When Redis is unreachable, each node goes on serving its own members
// alone (local seqs, local history) and /readyz reports it; when Redis is
// back, the node pushes each room's Redis counter above every seq it handed
// out, catches up what it missed, and cross-node delivery resumes.
//
// The files: redis.go (the type, its goroutines), redis_publish.go,
// redis_subscribe.go (subscriptions, loading rooms, receiving and filling
// gaps), redis_health.go (outages and recovery), redis_announce.go (the
// nodes of the dashboard).

package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// publishScript gives a message its seq, stores it and publishes it, and
// keeps the room's epoch alive as long as its seq.
// KEYS: seq counter, history stream, epoch. ARGV: prefix, suffix, history
// size, TTL in seconds, channel.
var publishScript = redis.NewScript(`
local seq = redis.call('INCR', KEYS[1])
local msg = ARGV[1] .. seq .. ARGV[2]
if tonumber(ARGV[3]) > 0 then
  redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], seq .. '-1', 'm', msg)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[4])
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
	h   Handler
	rdb *redis.Client
	ps  *redis.PubSub

	pubMu   sync.Mutex
	pending []Publication
	pubWake chan struct{}

	subMu   sync.Mutex
	subCmds []subCmd
	subWake chan struct{}
	rooms   map[string]*roomState // owned by the subscription goroutine, read under subMu

	announceMu   sync.Mutex
	self         [2]string // name and URL to announce, under announceMu
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

var _ Broker = (*Redis)(nil)

// NewRedis connects a broker to Redis for the rooms h. It fails when the URL is invalid,
// not when Redis is down: a node starts degraded and joins the cluster when
// Redis answers.
func NewRedis(cfg Config, h Handler) (*Redis, error) {
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
		cfg: cfg, log: cfg.Logger, h: h, rdb: rdb,
		pubWake: make(chan struct{}, 1), subWake: make(chan struct{}, 1), upWake: make(chan struct{}, 1),
		announceWake: make(chan struct{}, 1),
		rooms:        make(map[string]*roomState),
	}
	b.ps = rdb.Subscribe(context.Background())
	return b, nil
}

func (b *Redis) seqKey(room string) string     { return b.cfg.Prefix + ":{" + room + "}:seq" }
func (b *Redis) historyKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:history" }

// epochKey names the room's stream: made by the first node that loads the
// room, it lives as long as the room's seq; when the seq is gone (expired,
// Redis flushed) the next load makes a new one.
func (b *Redis) epochKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:epoch" }
func (b *Redis) channel(room string) string  { return b.cfg.Prefix + ":{" + room + "}:messages" }

func (b *Redis) roomOf(channel string) string {
	s := strings.TrimPrefix(channel, b.cfg.Prefix+":{")
	return strings.TrimSuffix(s, "}:messages")
}

// Up implements Broker: it reports whether Redis answers.
func (b *Redis) Up() bool { return b.up.Load() }

// Stats implements Broker.
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

// Run implements Broker: it works until ctx is done, then closes the
// Redis connections.
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
