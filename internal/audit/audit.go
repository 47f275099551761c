// Package audit runs a load whose verdict is delivery, not speed (issue 18):
// every client checks what it receives against what its room carried, and
// the run reports messages missing, duplicated, reordered or foreign, and
// whether every resume after a dropped connection was exact or flagged as a
// gap, while faults are injected on a schedule.
//
// Clients are goroutines speaking docs/protocol.md with the control frames
// (they need joined, history_gap and seq); the audit is about correctness,
// so hundreds of clients are enough, and they do their own reconnecting so
// that nothing in a client library hides a duplicate or a gap.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// Config is one audit run.
type Config struct {
	URL        string        // the server's WebSocket base URL; the room is appended as /{room}
	URLs       []string      // several nodes' base URLs instead: client i starts on node i mod n and moves to the next on each reconnect
	Protocol   string        // ProtocolScalechat (default), ProtocolLegacy or ProtocolSocketIO
	Rooms      int           // rooms
	RoomSize   int           // clients per room
	Interval   time.Duration // between two messages of one client
	Duration   time.Duration // how long clients send
	Drain      time.Duration // after sending stops: how long to wait for what is in flight
	DropEvery  time.Duration // fault: cut a random client's connection this often (0: never)
	Reconnect  time.Duration // how long a cut client waits before it reconnects
	RoomPrefix string        // room names are RoomPrefix-r<index>
	Seed       uint64        // seeds the faults' choice of clients and the send phases
	Log        io.Writer     // progress lines; nil: none
	// Names gives each client its sender as ?name= (WebSocket protocols),
	// so that it is a user to presence and webhooks (audit --webhooks).
	Names bool

	// Process faults, each once at its offset from the start of sending
	// (0: none), on a node chosen at random; they need Cluster.
	Cluster        Cluster
	NodeKillAt     time.Duration // SIGKILL a node; it starts again NodeDown later
	NodeTermAt     time.Duration // SIGTERM a node (it drains); it starts again NodeDown later
	NodePauseAt    time.Duration // SIGSTOP a node for NodeDown, then SIGCONT
	NodeCutAt      time.Duration // cut a node off from Redis for NodeDown; its clients stay connected
	RedisRestartAt time.Duration // stop Redis (its data is lost), start it again NodeDown later
	// RedisFailoverAt: SIGKILL the Redis Cluster master that serves the
	// most rooms, wait until its replica is promoted, start it again.
	RedisFailoverAt time.Duration
	// NATSRestartAt: stop the one nats-server (SIGTERM), start it again
	// NodeDown later on the same port and store (JetStream's data kept).
	NATSRestartAt time.Duration
	// NATSKillAt: SIGKILL one server of a NATS cluster of three, start it
	// again NodeDown later with its store.
	NATSKillAt time.Duration
	NodeDown   time.Duration
}

// Protocols the audit's clients speak.
const (
	// ProtocolScalechat is docs/protocol.md with its control frames:
	// joined, seq, resume with since and epoch, history_gap.
	ProtocolScalechat = "scalechat"
	// ProtocolLegacy is the original five-field JSON: the room of the URL,
	// chat frames only, no seq, no resume. What a client misses while it
	// is away is reported as such, not as a broken guarantee.
	ProtocolLegacy = "legacy"
	// ProtocolSocketIO is Socket.IO 4 with the join and chat events of
	// docs/loadtest.md (socketio.go); checked as ProtocolLegacy is.
	ProtocolSocketIO = "socketio"
)

// Cluster is the local cluster the process faults act on
// (bench.LocalCluster).
type Cluster interface {
	Nodes() int
	StopNode(i int, sig syscall.Signal) error
	StartNode(i int) error
	PauseNode(ctx context.Context, i int, d time.Duration) error
	// CutNode cuts node i off from Redis for d while it and its clients
	// go on.
	CutNode(ctx context.Context, i int, d time.Duration) error
	RestartRedis(ctx context.Context, down time.Duration) error
	// FailoverRedis kills the Redis Cluster master serving the most of
	// rooms and returns once a replica serves its slots, saying what it did.
	FailoverRedis(ctx context.Context, rooms []string) (string, error)
	// RestartNATS stops the one nats-server, waits down and starts it
	// again with its JetStream store.
	RestartNATS(ctx context.Context, down time.Duration) error
	// KillNATSServer SIGKILLs one server of a NATS cluster, waits down and
	// starts it again with its store, saying which it killed.
	KillNATSServer(ctx context.Context, down time.Duration) (string, error)
}

// Check refuses a configuration that cannot run and fills defaults.
func (c *Config) Check() error {
	if len(c.URLs) == 0 && c.URL != "" {
		c.URLs = []string{c.URL}
	}
	redisFaults := c.NodeCutAt > 0 || c.RedisRestartAt > 0 || c.RedisFailoverAt > 0
	natsFaults := c.NATSRestartAt > 0 || c.NATSKillAt > 0
	processFaults := c.NodeKillAt > 0 || c.NodeTermAt > 0 || c.NodePauseAt > 0 || redisFaults || natsFaults
	switch {
	case len(c.URLs) == 0:
		return errors.New("--url is required")
	case processFaults && c.Cluster == nil:
		return errors.New("node, Redis and NATS faults need a cluster the audit starts (--cluster N)")
	case c.RedisFailoverAt > 0 && c.RedisRestartAt > 0:
		return errors.New("--redis-failover needs a Redis Cluster and --redis-restart a single Redis: give one")
	case redisFaults && natsFaults:
		return errors.New("the Redis faults (--node-cut, --redis-restart, --redis-failover) and the NATS faults (--nats-restart, --nats-kill-one) need clusters on different engines: give one engine's")
	case c.NATSRestartAt > 0 && c.NATSKillAt > 0:
		return errors.New("--nats-restart needs one NATS server and --nats-kill-one a NATS cluster of three: give one")
	case c.NodeKillAt < 0 || c.NodeTermAt < 0 || c.NodePauseAt < 0 || c.NodeCutAt < 0 || c.RedisRestartAt < 0 || c.RedisFailoverAt < 0 ||
		c.NATSRestartAt < 0 || c.NATSKillAt < 0 || c.NodeDown < 0:
		return errors.New("fault times must not be negative")
	case c.Rooms < 1 || c.RoomSize < 1:
		return errors.New("--rooms and --room-size must be at least 1")
	case c.Rooms*c.RoomSize > 5000:
		return errors.New("an audit holds at most 5,000 clients (it checks every delivery of every one)")
	case c.Interval <= 0 || c.Duration <= 0:
		return errors.New("--msg-frequency and --duration must be positive")
	case c.Drain < 0 || c.DropEvery < 0 || c.Reconnect < 0:
		return errors.New("--drain, --drop-every and --reconnect must not be negative")
	}
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolScalechat
	case ProtocolScalechat, ProtocolLegacy, ProtocolSocketIO:
	default:
		return fmt.Errorf("--protocol %q is not scalechat, legacy or socketio", c.Protocol)
	}
	if c.NodeDown == 0 {
		c.NodeDown = time.Second
	}
	if c.RoomPrefix == "" {
		c.RoomPrefix = "audit" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	}
	return nil
}

// Run runs the audit until its sending time and drain are over, or ctx
// ends, and checks every delivery.
func Run(ctx context.Context, cfg Config) (*results.Audit, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	a := newAuditor(cfg)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xa0d17))
	for r := range cfg.Rooms {
		room := cfg.RoomPrefix + "-r" + strconv.Itoa(r)
		for range cfg.RoomSize {
			id := len(a.clients)
			a.clients = append(a.clients, newClient(a, id, room, time.Duration(rng.Int64N(int64(cfg.Interval)))))
		}
	}
	start := time.Now()
	a.logf("audit: %d clients in %d rooms of %d, a message every %s each for %s; faults: %s",
		len(a.clients), cfg.Rooms, cfg.RoomSize, cfg.Interval, cfg.Duration, a.faultsLine())

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, c := range a.clients {
		wg.Go(func() { c.run(runCtx) })
	}
	if err := a.waitJoined(ctx, 15*time.Second); err != nil {
		stop()
		wg.Wait()
		return nil, err
	}
	if cfg.Protocol == ProtocolLegacy {
		// A five-field server answers no join: it may add a client to its
		// room a moment after the upgrade. Nothing signals it; give it time.
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	a.logf("audit: every client joined in %s; sending", time.Since(start).Round(time.Millisecond))
	sendEnd := time.Now().Add(cfg.Duration)
	sendCtx, stopSending := context.WithDeadline(runCtx, sendEnd)
	var senders sync.WaitGroup
	for _, c := range a.clients {
		senders.Go(func() { c.send(sendCtx) })
	}
	if cfg.DropEvery > 0 {
		senders.Go(func() { a.injectFaults(sendCtx, rng) })
	}
	a.scheduleProcessFaults(sendCtx, &senders, rng)
	senders.Wait()
	stopSending()
	a.logf("audit: sending over; draining %s", cfg.Drain)
	a.drain(ctx, cfg.Drain)
	stop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := a.check()
	res.Started, res.Ended = start.UTC(), time.Now().UTC()
	return res, nil
}

func (a *auditor) logf(format string, args ...any) {
	if a.cfg.Log != nil {
		fmt.Fprintf(a.cfg.Log, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

func (a *auditor) faultsLine() string {
	var f []string
	if a.cfg.DropEvery > 0 {
		f = append(f, "a client's connection cut every "+a.cfg.DropEvery.String())
	}
	for _, p := range a.processFaults() {
		f = append(f, p.kind+" at "+p.at.String())
	}
	if len(f) == 0 {
		return "none"
	}
	return strings.Join(f, ", ")
}

// waitJoined waits until every client is in its room once.
func (a *auditor) waitJoined(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		n := 0
		for _, c := range a.clients {
			if c.hasJoined() {
				n++
			}
		}
		if n == len(a.clients) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d clients joined their room within %s (first error: %s)", n, len(a.clients), limit, a.firstError())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// drain waits up to d, less once every client is connected and has seen
// its room's latest seq for a while.
func (a *auditor) drain(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	quiet := 0
	for time.Now().Before(deadline) {
		if a.settled() {
			quiet++
			if quiet >= 5 { // 5 × 100 ms without a difference
				return
			}
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settled reports whether every client is connected and has the highest
// seq any client saw in its room.
func (a *auditor) settled() bool {
	top := map[string]uint64{}
	for _, c := range a.clients {
		c.mu.Lock()
		top[c.room] = max(top[c.room], c.lastSeq)
		c.mu.Unlock()
	}
	for _, c := range a.clients {
		c.mu.Lock()
		ok := c.connected && c.lastSeq == top[c.room]
		c.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// injectFaults cuts a random connected client's connection every DropEvery.
func (a *auditor) injectFaults(ctx context.Context, rng *rand.Rand) {
	t := time.NewTicker(a.cfg.DropEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range 10 { // a few tries to find a connected client
			c := a.clients[rng.IntN(len(a.clients))]
			if i, ok := c.cut(); ok {
				a.mu.Lock()
				a.faults = append(a.faults, faultRef{AuditFault: results.AuditFault{At: time.Now().UTC(), Kind: "drop", Target: c.name}, client: c, index: i})
				a.mu.Unlock()
				break
			}
		}
	}
}

func (a *auditor) firstError() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.firstErr == "" {
		return "none"
	}
	return a.firstErr
}

func (a *auditor) noteError(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.firstErr == "" {
		a.firstErr = err.Error()
	}
}

// msgKey names a message by its sender and the sender's counter.
type msgKey struct {
	sender  int
	counter uint64
}

// deliveredAt is where a message was first received, and by whom: the
// first of two seqs, when it comes under another.
type deliveredAt struct {
	room, epoch string
	seq         uint64
	client      int
}

type faultRef struct {
	results.AuditFault
	client *client
	index  int // the client's cut number
}

// auditor holds the run: its clients and what they all saw.
type auditor struct {
	cfg     Config
	clients []*client

	mu          sync.Mutex
	delivered   map[msgKey]deliveredAt // every message any client received, with its seq
	firstSeen   map[msgKey]time.Time   // legacy: when a client first received each message
	conflicts   int64                  // a message delivered with two different seqs or rooms
	ledger                             // every message by (sender, message_id) and by (room, epoch, seq)
	faults      []faultRef
	processRecs []results.AuditFault // process faults, with their recovery
	firstErr    string
}

func newAuditor(cfg Config) *auditor {
	return &auditor{cfg: cfg, delivered: map[msgKey]deliveredAt{}, firstSeen: map[msgKey]time.Time{}, ledger: newLedger()}
}

// sortedFaults returns the faults in time order with their recovery.
func (a *auditor) sortedFaults() []results.AuditFault {
	a.mu.Lock()
	refs := append([]faultRef(nil), a.faults...)
	procs := append([]results.AuditFault(nil), a.processRecs...)
	a.mu.Unlock()
	out := make([]results.AuditFault, len(refs), len(refs)+len(procs))
	for i, f := range refs {
		out[i] = f.AuditFault
		out[i].Recovered, out[i].RecoveredOK = f.client.recovery(f.index)
	}
	out = append(out, procs...)
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}
