// The NATS broker: the second cluster engine (docs/nats.md). As on Redis,
// every room has one owner node, the node that claimed it first (its record
// in the rooms' bucket, nats_rooms.go), which orders its messages and
// delivers them on that node at once. Here its ordered messages go to the
// other nodes on the room's core subject, which only nodes with members
// subscribe to (NATS routes by interest), and to the room's history stream
// behind (nats_history.go). A follower loads a room from its owner's
// snapshot and sends its members' publishes to the owner as requests on
// the room's owner subject, which only the owner subscribes to: a request
// nobody takes is answered at once (no responders), which is how a node
// learns the owner is gone.
//
// The files: nats.go (the type, its goroutines, its counters),
// nats_conn.go (connecting: servers, authentication, TLS), nats_state.go
// (the rooms subscribed here and the forwards on their way), nats_out.go
// (the next round's records and the history to write), nats_own.go
// (owned rooms: order, rounds, history behind, handover), nats_follow.go
// (following an owner: load, forward, gaps, takeover), nats_receive.go (a
// round's records), nats_wire.go (their encoding), nats_lease.go (the
// node's lease), nats_cluster.go (presence, nodes, control), and the
// pieces: nats_bus.go, nats_rooms.go, nats_history.go.
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSConfig configures a NATS broker.
type NATSConfig struct {
	// URL is the NATS servers, comma-separated: nats://host:4222[,…]
	// (tls:// for TLS). Credentials in a URL (nats://user:pass@host) are
	// taken as nats.go takes them.
	URL string
	// Authentication: at most one of User (with Password), Token, NKey (a
	// file holding an NKey seed) and Creds (a credentials file: a user JWT
	// and its seed).
	User, Password string
	Token          string
	NKey           string
	Creds          string
	// TLS: CA verifies the servers' certificates (the system's roots when
	// empty); Cert and Key, both or neither, are this node's client
	// certificate. TLS is on when any is set or a URL is tls://.
	CA, Cert, Key string
	// Replicas is how many servers keep the rooms' records, leases and
	// history (JetStream replicas): 1, or 3 on a cluster of three or more.
	// 0 means 1.
	Replicas int
	History  int           // messages kept per room; 0 keeps none
	TTL      time.Duration // a room's history expires after this long without messages
	Prefix   string        // of every subject, bucket and stream; "" means "scalechat"
	// Linger is how long an owner's messages for its followers, and a
	// follower's forwards, wait for others to go out with them in one
	// round; 0 means DefaultLinger.
	Linger time.Duration
	// HistoryLinger is how long an owned room's messages wait to be
	// written to its history stream with others; 0 means
	// DefaultHistoryLinger. Serve gives it --history-linger-followed (1 s
	// by default): on NATS the history is read only by a node that claims
	// a room its owner released (after writing it all) or takes over (in a
	// new epoch, whatever the dead owner wrote), so writing sooner keeps
	// nothing more and costs a JetStream write a room a linger.
	HistoryLinger time.Duration
	// Lease is how long a node's lease lives unrenewed: after it, the
	// others take its rooms over. 0 means DefaultNATSLease.
	Lease time.Duration
	// MaxWait, when positive, bounds how long records for other nodes
	// queue: while the oldest waited longer, publishes to rooms shared
	// with other nodes are refused (ErrOverloaded), as Config.MaxWait on
	// Redis; and every publish while maxPendingWrites history writes wait.
	MaxWait time.Duration
	// Room, when not nil, gives a room's own history size and TTL.
	Room   func(room string) RoomConfig
	Logger *slog.Logger
}

// DefaultNATSLease is a node's lease on NATS: longer than a JetStream
// election on a cluster of three (4.3–6.5 s measured, docs/nats.md), so
// that a leader's death does not lapse every node's lease.
const DefaultNATSLease = 10 * time.Second

// NATS is a broker backed by a NATS system: core subjects between nodes,
// JetStream for the rooms' records, the nodes' leases and the history. It
// holds its configuration and identity and one field per concern, each
// owning its lock (locksordering.txt).
type NATS struct {
	cfg NATSConfig
	log *slog.Logger
	h   Handler
	id  string // this node's id: its subjects and its lease
	nc  *nats.Conn
	js  jetstream.JetStream

	bus   *natsBus
	rooms *natsRooms
	hist  *natsHistory
	lease natsLease
	st    natsState // the rooms subscribed here and the forwards on their way
	out   natsOut   // what goes to other nodes at the next round, and to history
	pres  natsPresence
	count natsCounters

	ownCh  chan *nats.Msg // the owner subjects of the rooms held here
	roomCh chan *nats.Msg // the room subjects of the rooms subscribed here
	// histFlush asks the history loop to write at once; histDone is
	// closed when it ended.
	histFlush chan chan struct{}
	histDone  chan struct{}
	wg        sync.WaitGroup // every goroutine the broker starts
	base      atomic.Pointer[context.Context]
}

var (
	_ Broker   = (*NATS)(nil)
	_ Cluster  = (*NATS)(nil)
	_ JoinGate = (*NATS)(nil)
)

// natsChanSize is the queue of messages on owner and room subjects for the
// goroutine that reads them; past it the server counts this node a slow
// consumer (a gap: natsBus.slowConsumer's handling).
const natsChanSize = 1 << 16

// NewNATS connects to the NATS servers of cfg, opens the buckets and the
// stream, and returns the broker of this node, whose rooms are h. It fails
// when the servers cannot be reached or have no JetStream.
func NewNATS(cfg NATSConfig, h Handler) (*NATS, error) {
	cfg = cfg.withDefaults()
	b := &NATS{cfg: cfg, log: cfg.Logger, h: h, id: NewEpoch(),
		ownCh: make(chan *nats.Msg, natsChanSize), roomCh: make(chan *nats.Msg, natsChanSize),
		histFlush: make(chan chan struct{}), histDone: make(chan struct{})}
	bg := context.Background()
	b.base.Store(&bg)
	b.st.init()
	b.out.init()
	b.pres.init()
	nc, err := connectNATS(cfg, "scalechat-"+b.id,
		nats.ErrorHandler(b.asyncError),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { b.disconnected(err) }),
		nats.ReconnectHandler(func(*nats.Conn) { b.reconnected() }))
	if err != nil {
		return nil, err
	}
	b.nc = nc
	b.count.up.Store(true)
	if err := b.open(); err != nil {
		nc.Close()
		return nil, err
	}
	return b, nil
}

func (c NATSConfig) withDefaults() NATSConfig {
	if c.Prefix == "" {
		c.Prefix = "scalechat"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Linger <= 0 {
		c.Linger = DefaultLinger
	}
	if c.HistoryLinger <= 0 {
		c.HistoryLinger = DefaultHistoryLinger
	}
	if c.Lease <= 0 {
		c.Lease = DefaultNATSLease
	}
	if c.TTL <= 0 {
		c.TTL = 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// open makes (or opens) what the cluster keeps in JetStream and subscribes
// this node's subject.
func (b *NATS) open() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(b.nc)
	if err != nil {
		return fmt.Errorf("open JetStream on NATS: %w", err)
	}
	b.js = js
	name := strings.ReplaceAll(b.cfg.Prefix, ".", "_")
	if b.rooms, err = newNATSRooms(ctx, js, name+"_rooms", b.cfg.Replicas); err != nil {
		return err
	}
	runs := int64(max(b.cfg.History, 1)) // a run a message at worst: enough runs for History messages
	if b.hist, err = newNATSHistory(ctx, js, name+"_history", b.cfg.Prefix, runs, b.cfg.Replicas); err != nil {
		return err
	}
	if err := b.lease.open(ctx, js, name+"_nodes", b.cfg.Lease, b.cfg.Replicas); err != nil {
		return err
	}
	if err := b.pres.open(ctx, js, name+"_presence", b.cfg.Replicas); err != nil {
		return err
	}
	if err := b.lease.renew(ctx, b.id, b.leaseValue()); err != nil {
		return err
	}
	if b.bus, err = newNATSBus(b.nc, b.cfg.Prefix, b.id, b.receive); err != nil {
		return err
	}
	return b.subscribeControl()
}

// Subjects of a room.
func (b *NATS) ownSubject(room string) string  { return b.cfg.Prefix + ".own." + roomKey(room) }
func (b *NATS) roomSubject(room string) string { return b.cfg.Prefix + ".room." + roomKey(room) }

func (b *NATS) runCtx() context.Context { return *b.base.Load() }

// Run implements Broker: it starts the broker's goroutines, works until ctx
// is done, then hands the rooms it holds on and closes the connection.
func (b *NATS) Run(ctx context.Context) error {
	b.base.Store(&ctx)
	b.wg.Go(func() { b.roundLoop(ctx) })
	b.wg.Go(func() { b.historyLoop(ctx) })
	b.wg.Go(func() { b.leaseLoop(ctx) })
	b.wg.Go(func() { b.ownLoop(ctx) })
	b.wg.Go(func() { b.roomLoop(ctx) })
	b.wg.Go(func() { b.forwardLoop(ctx) })
	b.wg.Go(func() { b.presenceLoop(ctx) })
	b.wg.Go(func() { b.announceLoop(ctx) })
	<-ctx.Done()
	b.wg.Wait()
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.releaseAll(stop)
	err := b.bus.close()
	if derr := b.nc.Drain(); derr != nil {
		err = errors.Join(err, derr)
	}
	return err
}

// asyncError is the connection's error handler: a slow consumer on this
// node's subject is a gap in every room it follows.
func (b *NATS) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	b.count.errors.Add(1)
	if b.bus != nil && b.bus.slowConsumer(sub, err, b.lostRounds) {
		b.log.Warn("NATS dropped messages to this node (slow consumer): its followed rooms load anew", "err", err)
		return
	}
	if errors.Is(err, nats.ErrSlowConsumer) {
		b.lostRounds()
	}
	b.log.Warn("NATS error", "err", err)
}

func (b *NATS) disconnected(err error) {
	b.count.up.Store(false)
	if err != nil {
		b.log.Warn("lost the connection to NATS", "err", err)
	}
}

// reconnected: what other nodes sent meanwhile is lost: every followed
// room loads anew.
func (b *NATS) reconnected() {
	b.count.up.Store(true)
	b.count.reconnects.Add(1)
	b.log.Info("reconnected to NATS")
	b.lostRounds()
}

// natsCounters are the broker's counters, read by Stats.
type natsCounters struct {
	up                                           atomic.Bool
	published, received, errors, refused         atomic.Uint64
	overloaded, gaps, reconnects                 atomic.Uint64
	ownedPublished, releases, takeovers, dropped atomic.Uint64
	rooms, owned                                 atomic.Int64
}

// Stats implements Broker.
func (b *NATS) Stats() Stats {
	c := &b.count
	up := c.up.Load()
	return Stats{Up: up, InStep: up && b.lease.live(),
		Published: c.published.Load(), Received: c.received.Load(), Errors: c.errors.Load(),
		Refused: c.refused.Load(), Overloaded: c.overloaded.Load(), Gaps: c.gaps.Load(),
		Reconnects: c.reconnects.Load(), Rooms: c.rooms.Load(), Owned: c.owned.Load(),
		OwnedPublished: c.ownedPublished.Load(), Releases: c.releases.Load(),
		Takeovers: c.takeovers.Load(), Dropped: c.dropped.Load()}
}

// JoinsWait implements JoinGate: while this node's lease has lapsed, the
// joiners of a room it holds wait until it knows whether the room is still
// its own.
func (b *NATS) JoinsWait(room string) bool {
	return !b.lease.live() && b.st.owned(room)
}
