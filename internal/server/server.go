//go:build linux

package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/webui"
)

// Server is a scalechat chat server.
type Server struct {
	cfg    Config
	log    *slog.Logger
	hub    *room.Hub
	broker broker.Broker // broker.Memory on a single node, broker.Redis or broker.NATS in a cluster
	loops  []*loop
	http   *http.Server

	// The loops accept on lfd (accept.go) and hand net/http what is not
	// theirs through handoff; lfd is -1 when net/http accepts.
	lfd     int
	handoff *handoffListener
	// blockingAdmission makes admitBlocks true: a test sets it before
	// Serve, to take the path a blocking admission check will take.
	blockingAdmission bool

	ips       *ipLimiter   // nil without per-address limits
	upgrading sync.RWMutex // read-held by each upgrade in progress
	stopMu    sync.RWMutex // read-held by refusals on their way to a loop
	stopped   bool         // the loops were told to stop; under stopMu

	// The HTTP transport (poll.go).
	postLimit    *pollLimiter
	stopPolls    chan struct{} // closed at shutdown: waiting polls answer at once
	polls        atomic.Uint64
	waitingPolls atomic.Int64
	httpIn       atomic.Uint64 // chat messages POSTed
	httpOut      atomic.Uint64 // chat messages returned to polls
	httpDropped  [dropReasons]atomic.Uint64
	httpBytesIn  atomic.Uint64 // bytes read on HTTP connections, WebSocket handshakes included
	httpBytesOut atomic.Uint64
	bridges      sync.WaitGroup // TLS bridge goroutines

	next           atomic.Uint32 // round-robin loop choice
	conns          atomic.Int64  // WebSocket connections open (or being handed to a loop)
	httpConns      atomic.Int64  // HTTP connections open, not upgraded (httplimits.go)
	accepted       atomic.Uint64
	acceptedOnLoop atomic.Uint64
	refused        [refuseReasons]atomic.Uint64
	refusals       *refusalLog // why, in the log
	ready          atomic.Bool
	draining       atomic.Bool

	// The server API (api.go).
	id           string // names this node in connection ids
	started      time.Time
	announceMu   sync.Mutex
	name         string // announced to the cluster
	metricsURL   string // announced with name; "" until Announce
	apiRequests  [apiOutcomes]atomic.Uint64
	apiPublished atomic.Uint64
	waiters      waiters // HTTP publishes waiting for their seq

	hooks    *hooks.Client // nil without hooks
	hookJobs chan hookJob  // join and publish calls waiting for a hook worker
	// hookJobsGone counts the jobs of connections closed before a worker
	// took them, dropped uncalled.
	hookJobsGone atomic.Uint64
	hookLog      hookLog
	webhooks     *webhooks // nil: off (webhook.go)
}

// New returns a server with the given configuration.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid server configuration: %w", err)
	}
	cfg.fill()
	s := &Server{cfg: cfg, log: cfg.Logger, id: broker.NewEpoch()[:8], started: time.Now(), lfd: -1}
	s.hookLog.log = cfg.Logger
	if cfg.Hooks.Any() {
		var err error
		if s.hooks, err = hooks.New(cfg.Hooks, s.id); err != nil {
			return nil, fmt.Errorf("invalid server configuration: %w", err)
		}
		s.hookJobs = make(chan hookJob, 16*s.hooks.Workers())
	}
	queues := make([]*room.Queue, cfg.Loops)
	for i := range cfg.Loops {
		l, err := newLoop(i, s)
		if err != nil {
			for _, l := range s.loops {
				l.poller.Close()
			}
			return nil, fmt.Errorf("start event loop: %w", err)
		}
		s.loops = append(s.loops, l)
		queues[i] = l.queue
	}
	hubCfg := room.Config{History: cfg.History, Grace: cfg.RoomGrace, Queues: queues,
		MaxRooms: cfg.MaxRooms, MaxHistoryBytes: cfg.MaxHistoryBytes, Compression: cfg.Compression,
		Options: s.roomOptions, Framing: wsFraming{}, Disconnect: s.disconnect, Settled: s.settled}
	if cfg.Redis != "" {
		hubCfg.Broker = func(h broker.Handler) (broker.Broker, error) {
			return broker.NewRedis(broker.Config{URL: cfg.Redis, History: cfg.History, TTL: cfg.RedisTTL, Linger: cfg.RedisLinger, HistoryLinger: cfg.HistoryLinger, FollowedLinger: cfg.FollowedLinger, MaxWait: cfg.RedisMaxWait, Balance: cfg.RedisBalance, Room: s.brokerRoom, Logger: cfg.Logger}, h)
		}
	}
	if cfg.NATS.URL != "" {
		natsCfg := cfg.NATS // the connection's settings; the rest from the flags the engines share
		natsCfg.History, natsCfg.TTL, natsCfg.Linger, natsCfg.HistoryLinger = cfg.History, cfg.RedisTTL, cfg.RedisLinger, cfg.FollowedLinger
		natsCfg.Room, natsCfg.Logger, natsCfg.MaxWait = s.brokerRoom, cfg.Logger, cfg.RedisMaxWait
		hubCfg.Broker = func(h broker.Handler) (broker.Broker, error) {
			return broker.NewNATS(natsCfg, h)
		}
	}
	wh, err := newWebhooks(cfg)
	if err == nil && wh != nil {
		s.webhooks = wh
		hubCfg.Tracker = wh.tracker
	}
	var hub *room.Hub
	if err == nil {
		hub, err = room.NewHub(hubCfg)
	}
	if err != nil {
		for _, l := range s.loops {
			l.poller.Close()
		}
		return nil, err
	}
	s.hub = hub
	s.broker = hub.Broker()
	s.ips = newIPLimiter(cfg.MaxConnsPerIP, cfg.ConnectRatePerIP)
	s.refusals = newRefusalLog(cfg.Logger, refusalLinesPerSecond)
	s.postLimit = &pollLimiter{rate: cfg.RateLimit, burst: float64(cfg.RateBurst), m: make(map[string]*bucket)}
	s.stopPolls = make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.handleWS)
	mux.HandleFunc("GET /ws/{room}", s.handleWS)
	mux.HandleFunc("GET /ws/{$}", s.handleBadRoom) // an empty room name is a bad one, not the page's 404
	mux.HandleFunc("GET /ws/{room}/{rest...}", s.handleBadRoom)
	if cfg.EchoEndpoint {
		mux.HandleFunc("GET /echo", s.handleEcho)
	}
	mux.HandleFunc("POST /rooms/{room}/messages", s.handlePost)
	mux.HandleFunc("GET /rooms/{room}/messages", s.handlePoll)
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.HandleFunc("GET /readyz", s.handleReady)
	s.routeAPI(mux)
	mux.Handle("GET /", webui.Handler())
	s.http = &http.Server{
		Handler:           s.limitHTTP(mux),
		ConnState:         s.connState,
		ConnContext:       s.connContext,
		ReadHeaderTimeout: cfg.HandshakeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Serve accepts connections on ln until ctx is done, then shuts down
// gracefully: /readyz fails, new connections are refused, every client gets
// close 1001 after the messages already accepted, and Serve returns once
// every connection is closed or the shutdown timeout has passed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ln, err := s.listenOnLoops(ln)
	if err != nil {
		return err
	}
	defer s.closeListener()
	var wg sync.WaitGroup
	loopErrs := make(chan error, len(s.loops))
	for _, l := range s.loops {
		wg.Go(func() {
			if err := l.run(); err != nil {
				loopErrs <- fmt.Errorf("event loop %d: %w", l.id, err)
			}
		})
	}
	hubCtx, stopHub := context.WithCancel(context.Background())
	wg.Go(func() { s.hub.Run(hubCtx) })
	if s.hooks != nil {
		for range s.hooks.Workers() {
			wg.Go(func() { s.runHookWorker(hubCtx) })
		}
		defer s.hooks.Close()
	}
	brokerCtx, stopBroker := context.WithCancel(context.Background())
	wg.Go(func() {
		if err := s.broker.Run(brokerCtx); err != nil {
			s.log.Debug("broker closed", "err", err)
		}
	})
	whCtx, stopWebhooks := context.WithCancel(context.Background())
	if s.webhooks != nil {
		wg.Go(func() { s.webhooks.serve(whCtx, s.cfg.ShutdownTimeout) })
	}
	wg.Go(func() { // forget idle senders and addresses; report refusals held back
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-hubCtx.Done():
				return
			case now := <-t.C:
				s.postLimit.sweep(now)
				s.refusals.flush(now)
				if s.ips != nil {
					s.ips.sweep(now)
				}
			}
		}
	})
	if s.handoff == nil {
		ln = &countingListener{Listener: ln, in: &s.httpBytesIn, out: &s.httpBytesOut, srv: s}
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	httpErr := make(chan error, 1)
	wg.Go(func() { httpErr <- s.http.Serve(ln) })
	s.ready.Store(true)
	s.log.Info("serving", "addr", ln.Addr().String(), "loops", len(s.loops), "accept", map[bool]string{true: "event loops", false: "net/http"}[s.handoff != nil])

	select {
	case <-ctx.Done():
	case err = <-httpErr:
		err = fmt.Errorf("http server: %w", err)
	case err = <-loopErrs:
	}
	s.shutdown()
	stopHub()
	stopBroker()
	stopWebhooks() // after the loops: their last connections' changes are in
	wg.Wait()
	s.bridges.Wait() // the loops closed their ends: every bridge has ended
	if err == nil {
		select {
		case err = <-loopErrs:
		default:
		}
	}
	return err
}

func (s *Server) shutdown() {
	start := time.Now()
	s.ready.Store(false)
	s.draining.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	s.unlisten(ctx.Done()) // new connections are refused, as net/http's closed listener refuses them
	// Wait for upgrades in progress (they hold the read lock), so their
	// connections get drained too; then answer the waiting polls.
	s.upgrading.Lock()
	close(s.stopPolls)
	s.upgrading.Unlock()
	s.log.Info("shutting down", "connections", s.conns.Load())
	if err := s.http.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("http shutdown", "err", err)
	}
	// Two steps: every loop stops reading before any closes its members.
	// A message accepted on one loop is in the queue of every loop with
	// members of its room by the time that loop drains.
	for _, l := range s.loops {
		l.command(command{kind: cmdQuiesce})
	}
	for _, l := range s.loops {
		select {
		case <-l.quiesced:
		case <-ctx.Done():
		}
	}
	for _, l := range s.loops {
		l.command(command{kind: cmdDrain})
	}
	for _, l := range s.loops {
		select {
		case <-l.drained:
		case <-ctx.Done():
		}
	}
	left := s.conns.Load()
	s.stopMu.Lock() // no command after cmdStop: a stopped loop's poller is closed
	s.stopped = true
	for _, l := range s.loops {
		l.command(command{kind: cmdStop})
	}
	s.stopMu.Unlock()
	s.log.Info("shut down", "took", time.Since(start).Round(time.Millisecond), "forced_closes", left)
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !s.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "shutting down")
		return
	}
	if !s.broker.Stats().InStep {
		// Still serving this node's members: a load balancer should keep
		// sending clients here, so the status stays 200.
		w.Header().Set("X-Scalechat-Degraded", s.cfg.engine())
		fmt.Fprintf(w, "degraded: %s unreachable, rooms owned here go on, messages to shared rooms are refused\n", s.cfg.engine())
		return
	}
	fmt.Fprintln(w, "ready")
}

// Announce makes this node known to the other nodes of its cluster as name,
// with the URL of its metrics.
func (s *Server) Announce(name, metricsURL string) {
	s.announceMu.Lock()
	s.name, s.metricsURL = name, metricsURL
	s.announceMu.Unlock()
	if c, ok := s.hub.Cluster(); ok {
		c.Announce(name, metricsURL)
	}
}

// SetNodeName names this node in the server API's node info (Announce does
// too, for a node with metrics).
func (s *Server) SetNodeName(name string) {
	s.announceMu.Lock()
	s.name = name
	s.announceMu.Unlock()
}

// ClusterNodes returns the nodes of the cluster that announced themselves
// (name to metrics URL, this one included): on a single node, this one
// once announced.
func (s *Server) ClusterNodes(ctx context.Context) (map[string]string, error) {
	if c, ok := s.hub.Cluster(); ok {
		return c.Nodes(ctx)
	}
	s.announceMu.Lock()
	defer s.announceMu.Unlock()
	if s.name == "" || s.metricsURL == "" {
		return map[string]string{}, nil
	}
	return map[string]string{s.name: s.metricsURL}, nil
}

// BrokerStats returns the broker's counters, and whether the node is part
// of a cluster.
func (s *Server) BrokerStats() (broker.Stats, bool) {
	return s.broker.Stats(), s.cfg.clustered()
}
