// The Redis broker: every room of a cluster has one owner node, the node
// that loaded it first (it claims the room's holder key in Redis), which
// orders all its messages, delivers them on that node at once and writes
// them to the room's capped history stream in Redis behind (persist.lua, a
// round of writes per call). The other nodes that have the room follow the
// owner: they load it from the owner's snapshot, get every message it
// orders on their node's channel, in batches, and send their members'
// publishes on to it (redis_follow.go). No script runs for a message. A
// node subscribes to a room's channel (its control messages: presence, new
// streams, takeovers) only while it has members of the room, so no node
// reads traffic it does not need.
//
// When Redis is unreachable, a node goes on ordering the rooms it owns that
// no other node follows (all their members are on it) and refuses messages
// to every other room (ErrUnavailable), and /readyz reports it. When Redis
// is back, it checks each room's stream against Redis (streamScript): the
// same epoch, with a counter at or above every seq the node has (a room
// held by an owner: the epoch alone), is the same stream, and the node
// catches up what it missed; any other (Redis lost the room, or some of its
// messages) starts a new epoch, and the room's members here are closed
// with 1012 to resume into it and be told what they missed (lostStream).
//
// The same broker runs on a Redis Cluster (redis_cluster.go): a room's keys
// live in one hash slot, and each node's channel is a shard channel.
//
// The files: redis.go (the type, its goroutines, its counters), redis_publish.go,
// redis_own.go and redis_ownstate.go (owned rooms), redis_follow.go,
// redis_followset.go and redis_followwire.go (following an owner),
// redis_presence.go, redis_subscribe.go (subscriptions, loading rooms,
// filling gaps), redis_nodechan.go (a node's channel: its records,
// rejoining the rooms' sets), redis_health.go (outages and recovery),
// redis_cluster.go (slots, shard channels), redis_announce.go (the nodes of
// the dashboard), redis_scripts.go (the Lua scripts of lua/, embedded).

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

// Config configures a Redis broker.
type Config struct {
	URL     string        // redis://[user:password@]host:port/db, or redis-cluster://[user:password@]host:port,host:port...
	History int           // messages kept per room in Redis; 0 keeps none
	TTL     time.Duration // a room's keys expire after this long without messages
	Prefix  string        // of every key and channel
	// Linger is how long a message of a room shared with other nodes (a
	// forward to its owner, or the owner's records to its followers)
	// waits for others to go out with it in one round to Redis; 0 means
	// DefaultLinger. Longer rounds carry more messages: less CPU on the
	// nodes and in Redis a message, more latency (docs/cluster.md).
	Linger time.Duration
	// HistoryLinger is how long the messages of rooms this node owns wait
	// to be written to Redis's history with others, in one script call; 0
	// means DefaultHistoryLinger.
	HistoryLinger time.Duration
	// FollowedLinger is how long the messages of rooms this node orders
	// and other nodes follow may wait to be written with others: their
	// followers hold them too, and write what Redis lacks if this node
	// goes before it wrote them (redis_fill.go). 0 means
	// DefaultFollowedLinger; never less than HistoryLinger.
	FollowedLinger time.Duration
	// MaxWait, when positive, bounds how long messages to other nodes
	// queue: while the oldest of them waited longer, publishes to rooms
	// shared with other nodes are refused (ErrOverloaded). 0: no bound.
	MaxWait time.Duration
	// Room, when not nil, gives a room's own history size and TTL (its
	// namespace's), in place of History and TTL: called once when the
	// node subscribes to the room, and for publishes into a room it has
	// not subscribed to.
	Room func(room string) RoomConfig
	// Balance, when positive, is how often the node cedes rooms it shares
	// with other nodes while it owns more of them than it follows
	// (redis_balance.go); 0 never does (the default: experimental).
	Balance time.Duration
	Logger  *slog.Logger
}

// pubsub is one subscription connection: to the one Redis, or to one master
// of a Redis Cluster for the rooms of its slots.
type pubsub struct {
	addr   string        // the master's address; "" for the one Redis
	client *redis.Client // the master's own client (a cluster); nil for the one Redis
	ps     *redis.PubSub
}

func (s *pubsub) subscribe(ctx context.Context, channels []string) error {
	if s.client == nil {
		return s.ps.Subscribe(ctx, channels...)
	}
	for _, same := range bySlot(channels) { // one slot per SSUBSCRIBE
		if err := s.ps.SSubscribe(ctx, same...); err != nil {
			return err
		}
	}
	return nil
}

func (s *pubsub) unsubscribe(ctx context.Context, channels []string) error {
	if s.client == nil {
		return s.ps.Unsubscribe(ctx, channels...)
	}
	for _, same := range bySlot(channels) {
		if err := s.ps.SUnsubscribe(ctx, same...); err != nil {
			return err
		}
	}
	return nil
}

func (s *pubsub) close() error {
	err := s.ps.Close()
	if s.client != nil {
		err = errors.Join(err, s.client.Close())
	}
	return err
}

// Redis is a broker backed by Redis. It holds its configuration and its
// identity, and one field per concern: each a type that owns its state and
// its lock (locksordering.txt says which lock may be taken under which).
type Redis struct {
	cfg Config
	log *slog.Logger
	h   Handler
	rdb redis.UniversalClient
	// leaseRdb is a connection of its own for the node's lease
	// (renewLease): behind the rounds of a node past its capacity in rdb's
	// pool, the renewal missed its second, the node looked dead to its
	// peers, and they dropped every room they followed from it, closing
	// its members with 1012 (two nodes past the VM's knee, 2026-11-28).
	leaseRdb redis.UniversalClient
	// cluster is rdb when it is a Redis Cluster; nil for one Redis.
	cluster *redis.ClusterClient
	id      string // this node's name in the rooms it owns

	shards shardConns    // the subscription connections and the slot map (redis_cluster.go)
	sub    subscriptions // the rooms subscribed here, and their queued (un)subscriptions (redis_subscribe.go)
	pub    publisher     // the jobs for the next round to Redis (redis_publish.go)
	health healthState   // whether Redis answers, and the outage in progress (redis_health.go)
	lease  leaseState    // until when the rooms held here are this node's (redis_own.go)
	own    ownState      // rooms held here, followed, and their followers (redis_ownstate.go, redis_followset.go)
	ann    announcer     // this node's name and URL for the others (redis_announce.go)
	count  counters      // what Stats reports

	// fillMu: one catch-up or gap fill at a time, never interleaved with a
	// delivery from the channel (redis_subscribe.go, redis_nodechan.go).
	fillMu sync.Mutex
	waitWG sync.WaitGroup // the goroutines waiting for a room's owner (followRoom) or sending a publish on to its holder (forwardToHolder)
	// base is Run's context (*context.Context), for the work handed on
	// to goroutines of their own (a publish sent to its room's holder):
	// Publish reads it, and may be called before Run sets it.
	base atomic.Pointer[context.Context]
}

// runCtx returns Run's context, or the background one before Run.
func (b *Redis) runCtx() context.Context { return *b.base.Load() }

var _ Broker = (*Redis)(nil)

// respVersion is the Redis protocol the broker speaks: RESP2. The broker
// reads nothing RESP3 adds, and with RESP3 go-redis looks for push
// notifications on every pipeline and every pub/sub receive (a peek and its
// deadline each time: 6 % of a cluster node's CPU with rooms split).
const respVersion = 2

// NewRedis connects a broker to Redis for the rooms h. It fails when the URL is invalid,
// not when Redis is down: a node starts degraded and joins the cluster when
// Redis answers.
func NewRedis(cfg Config, h Handler) (*Redis, error) {
	var rdb, leaseRdb redis.UniversalClient
	var cluster *redis.ClusterClient
	if isClusterURL(cfg.URL) {
		opts, err := parseClusterURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("redis cluster URL %q: %w", cfg.URL, err)
		}
		cluster = redis.NewClusterClient(opts)
		rdb = cluster
		lo := *opts
		lo.PoolSize = 1
		leaseRdb = redis.NewClusterClient(&lo)
	} else {
		opts, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("redis URL %q: %w", cfg.URL, err)
		}
		opts.DialTimeout = time.Second
		opts.ReadTimeout = 2 * time.Second
		opts.WriteTimeout = 2 * time.Second
		// Never retried by the client: a round it sent again after its
		// connection broke would run its scripts and PUBLISHes twice, and
		// a message Redis or an owner ordered already would get a second
		// seq. go-redis reads 0 as its default, 3 retries; -1 is none.
		opts.MaxRetries = -1
		opts.DialerRetries = 1
		opts.PoolSize = 8
		opts.Dialer = rawDialer(opts.DialTimeout, opts.TLSConfig != nil)
		opts.Protocol = respVersion
		rdb = redis.NewClient(opts)
		lo := *opts
		lo.PoolSize = 1
		leaseRdb = redis.NewClient(&lo)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "scalechat"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Linger > MaxLinger {
		return nil, fmt.Errorf("a publish linger of %s is longer than %s", cfg.Linger, MaxLinger)
	}
	if cfg.HistoryLinger <= 0 {
		cfg.HistoryLinger = DefaultHistoryLinger
	}
	if cfg.HistoryLinger > MaxHistoryLinger {
		return nil, fmt.Errorf("a history linger of %s is longer than %s", cfg.HistoryLinger, MaxHistoryLinger)
	}
	if cfg.FollowedLinger <= 0 {
		cfg.FollowedLinger = DefaultFollowedLinger
	}
	if cfg.FollowedLinger > MaxHistoryLinger {
		return nil, fmt.Errorf("a followed rooms' history linger of %s is longer than %s", cfg.FollowedLinger, MaxHistoryLinger)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Redis{
		cfg: cfg, log: cfg.Logger, h: h, rdb: rdb, leaseRdb: leaseRdb, cluster: cluster, id: NewEpoch(),
		sub: newSubscriptions(), pub: newPublisher(cfg.HistoryLinger, cfg.FollowedLinger),
		health: healthState{wake: make(chan struct{}, 1)}, lease: leaseState{wake: make(chan struct{}, 1)},
		own: newOwnState(), count: counters{transit: newTransit()},
		ann: announcer{wake: make(chan struct{}, 1)},
	}
	bg := context.Background()
	b.base.Store(&bg)
	b.shards = shardConns{conns: make(map[string]*pubsub), left: make(chan struct{}, 1), cluster: cluster, channel: b.channel, receive: b.receiveLoop, fail: b.fail}
	if cluster == nil {
		b.shards.conns[""] = &pubsub{ps: rdb.Subscribe(context.Background())}
	}
	return b, nil
}

func (b *Redis) seqKey(room string) string     { return b.cfg.Prefix + ":{" + room + "}:seq" }
func (b *Redis) historyKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:history" }

// epochKey names the room's stream: made by the first node that loads the
// room, it lives as long as the room's seq; when the seq is gone (expired,
// Redis flushed) the next load makes a new one.
func (b *Redis) epochKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:epoch" }
func (b *Redis) channel(room string) string  { return b.cfg.Prefix + ":{" + room + "}:messages" }

// nodeChannelPrefix names the nodes' channels: with the node's id, the one
// on which the one Redis sends a node the messages of every room it loaded,
// in batches (redis_nodechan.go).
func (b *Redis) nodeChannelPrefix() string { return b.cfg.Prefix + ":node:" }

// nodeChannel is this node's channel: subscribed once, before any room.
func (b *Redis) nodeChannel() string { return b.nodeChannelPrefix() + b.id }

func (b *Redis) roomOf(channel string) string {
	s := strings.TrimPrefix(channel, b.cfg.Prefix+":{")
	return strings.TrimSuffix(s, "}:messages")
}

// counters is what the broker counts of its work, and its last error: each
// is added to where the work happens, by any goroutine, and read by Stats.
// No lock: every field is atomic on its own, and Stats is no snapshot of
// them all at one instant.
type counters struct {
	published      atomic.Uint64 // each as Stats names it (broker.go)
	received       atomic.Uint64
	errs           atomic.Uint64
	local          atomic.Uint64
	refused        atomic.Uint64
	overloaded     atomic.Uint64
	diverged       atomic.Uint64
	gaps           atomic.Uint64
	lost           atomic.Uint64 // Stats.Unrecovered
	reconnects     atomic.Uint64
	ownedPublished atomic.Uint64
	releases       atomic.Uint64
	ceded          atomic.Uint64
	takeovers      atomic.Uint64
	dropped        atomic.Uint64
	transit        transit // Stats.Transit
	lastErr        atomic.Pointer[string]
}

// read fills the counters' fields of s.
func (c *counters) read(s *Stats) {
	s.Published, s.Received, s.Errors = c.published.Load(), c.received.Load(), c.errs.Load()
	s.Local, s.Gaps, s.Unrecovered = c.local.Load(), c.gaps.Load(), c.lost.Load()
	s.Reconnects, s.OwnedPublished = c.reconnects.Load(), c.ownedPublished.Load()
	s.Releases, s.Takeovers, s.Dropped = c.releases.Load(), c.takeovers.Load(), c.dropped.Load()
	s.Ceded = c.ceded.Load()
	s.Refused, s.Diverged, s.Overloaded = c.refused.Load(), c.diverged.Load(), c.overloaded.Load()
	s.Transit = c.transit.read()
	if e := c.lastErr.Load(); e != nil {
		s.LastError = *e
	}
}

// Stats implements Broker.
func (b *Redis) Stats() Stats {
	n := b.sub.count()
	held := b.own.heldCount()
	s := Stats{Up: b.health.up.Load(), InStep: b.health.ready(), Rooms: int64(n), Owned: int64(held)}
	b.count.read(&s)
	return s
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// drain takes a signal left in c, if any.
func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// Run implements Broker: it works until ctx is done, then closes the
// Redis connections.
func (b *Redis) Run(ctx context.Context) error {
	b.base.Store(&ctx)
	// The receive loops stop last: see the end.
	recv, stopRecv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRecv()
	b.shards.recv = recv
	if b.checkUp(ctx) {
		b.health.up.Store(true)
	}
	b.health.started.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { b.publishLoop(ctx) })
	if s := b.shards.conns[""]; s != nil {
		// Before any room's subscription, on the same connection: a node
		// joins a room's set of nodes (and so gets its messages here) only
		// after its room channel is confirmed, and Redis sends the node's
		// channel and its rooms' channels in one order. The channel is kept
		// when Redis is down, and subscribed again with every other one, in
		// one command, when the connection comes back.
		if err := s.ps.Subscribe(ctx, b.nodeChannel()); err != nil && b.health.up.Load() {
			b.fail("subscribe the node's channel", err)
		}
		b.shards.wg.Go(func() { b.receiveLoop(recv, s) })
	}
	if b.cluster != nil {
		if err := b.shards.subscribeNode(ctx, b.nodeChannel()); err != nil && b.health.up.Load() {
			b.fail("subscribe the node's channel", err) // again at the next reshard
		}
	}
	wg.Go(func() { b.subscribeLoop(ctx) })
	wg.Go(func() { b.healthLoop(ctx) })
	wg.Go(func() { b.announceLoop(ctx) })
	wg.Go(func() { b.leaseLoop(ctx) })
	wg.Go(func() { b.controlLoop(ctx) })
	wg.Go(func() { b.keepAliveLoop(ctx) })
	wg.Go(func() { b.forwardSweepLoop(ctx) })
	wg.Go(func() { b.balanceLoop(ctx) })
	<-ctx.Done()
	wg.Wait()
	b.waitWG.Wait()
	// Still subscribed while the owned rooms are handed over: a publish
	// another node forwards here meanwhile is answered (this node no
	// longer orders its room: its node sends it on to the new owner). Deaf
	// before, this node looked dead to them: their PUBLISH reached nobody,
	// and they dropped the rooms they followed from it (their members were
	// closed with 1012) or refused the publish.
	b.handOver()
	b.leaveNodeChannel()
	stopRecv() // first: a receive loop whose connection closed under it would take Redis for lost
	errs := b.shards.closeAll()
	b.shards.wg.Wait()
	b.signOff()
	return errors.Join(append(errs, b.rdb.Close(), b.leaseRdb.Close())...)
}

// leaveNodeChannel stops the node's channel, at shutdown, once every record
// sent to it before was read (shardConns.leaveNode).
func (b *Redis) leaveNodeChannel() {
	if !b.health.up.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.shards.leaveNode(ctx, b.nodeChannel()); err != nil {
		b.log.Warn("publishes other nodes sent here as the node stopped may be refused to their senders", "err", err)
	}
}

// signOff sends, at shutdown, the records queued for other nodes after the
// loop that sends them ended (answers to publishes forwarded while the
// rooms were handed over, and on a Redis Cluster the handovers' own
// records: tellHandover), then ends the node's lease.
func (b *Redis) signOff() {
	if !b.health.up.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if sends := b.pub.takeSends(); len(sends) > 0 {
		b.send(ctx, sends)
	}
	_ = b.rdb.Del(ctx, b.leaseKey(b.id)).Err() // best effort: it expires anyway
}

// handOver, at shutdown, writes what owned rooms ordered and releases them,
// so that the nodes their members move to load them at once, with no
// takeover; then the node's lease ends.
func (b *Redis) handOver() {
	if !b.health.up.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rooms := b.own.heldRooms()
	var jobs []job
	for _, r := range rooms {
		// Dropped: the node orders nothing more, and its members (none
		// left once the server drained) rejoin elsewhere. The room is
		// given up under its order, with its last seq, so that the
		// unsubscription the hub makes as it drops it finds nothing to
		// release (it releases a room dropped before it loaded).
		var seq uint64
		var fs []string
		mine := false
		take := func() { mine, fs = b.own.giveUp(r), b.own.takeFollowers(r) }
		if !b.h.Drop(r, func(_ string, last uint64, _ []Entry) { seq = last; take() }) {
			take()
		}
		if !mine {
			continue
		}
		if len(fs) > 0 {
			jobs = append(jobs, b.handoffJob(r, seq, fs))
			continue
		}
		jobs = append(jobs, job{kind: jobRelease, room: r, e: Entry{Seq: seq}})
	}
	jobs = append(b.pub.takeWrites(), jobs...) // what is still to be written goes first
	if len(jobs) > 0 {
		b.send(ctx, jobs)
	}
}
