//go:build linux

package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/metrics"
	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/webhook"
)

func newServeCmd() *cobra.Command { return newServeCmdOf(newServeFlags()) }

// newServeCmdOf is serve's command setting o.
func newServeCmdOf(o *serveFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the chat server",
		Long:  serveLong,
		Example: `  scalechat serve --config scalechat.yaml
  scalechat serve --check-config scalechat.yaml`,
		Args: serveArgs(o),
		// After bindEnv's, which sets the flags from the environment
		// first: the file sets only what neither the command line nor
		// the environment did.
		PreRunE: func(cmd *cobra.Command, args []string) error { return o.readConfig(cmd, args) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.config.check {
				return checkConfig(cmd, o)
			}
			return runServe(cmd, o)
		},
	}
	o.define(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

// newServeFlags returns serve's flags at their defaults.
func newServeFlags() *serveFlags {
	o := &serveFlags{
		cfg: server.DefaultConfig(), addr: "127.0.0.1:8080", metricsAddr: "127.0.0.1:8081",
		logLevel: "info", logFormat: "text",
	}
	o.maxMsg, o.maxQueue, o.echoMaxMsg = byteSize(o.cfg.MaxMessageSize), byteSize(o.cfg.MaxQueue), byteSize(o.cfg.EchoMaxMessage)
	o.webhookQueueBytes = webhook.DefaultQueueBytes
	return o
}

// newServeFlagSet returns a flag set of serve's flags at their defaults.
func newServeFlagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	newServeFlags().define(fs)
	return fs
}

// serveFlags are the flags of scalechat serve.
type serveFlags struct {
	cfg                               server.Config
	jwtSecret, jwtPublicKey, jwksFile string
	apiKeyFile                        string
	tlsCert, tlsKey                   string
	maxHistory, maxBody               byteSize
	webhookQueueBytes                 byteSize
	addr, metricsAddr                 string
	metricsAdvertise                  string
	maxMsg, maxQueue, echoMaxMsg      byteSize
	logLevel, logFormat               string
	hookFail                          string
	hookFailEach                      [3]string // connect, join, publish: overrides hookFail
	roomOrder                         string    // the removed --room-order, still read so that scripts that give it are told (checkRoomOrder)
	config                            configFlags
}

func (o *serveFlags) define(f *pflag.FlagSet) {
	f.StringVar(&o.addr, "addr", o.addr, "address to listen on, host:port")
	f.StringVar(&o.metricsAddr, "metrics-addr", o.metricsAddr, `address of the metrics listener (/metrics, /dashboard), host:port; "" turns metrics off`)
	f.IntVar(&o.cfg.History, "history", o.cfg.History, "messages kept per room and replayed to joining clients; 0 disables history")
	f.Var(&o.maxMsg, "max-message-size", "largest client message; larger ones close the connection with 1009")
	f.IntVar(&o.cfg.MaxConnections, "max-connections", o.cfg.MaxConnections, "open connections, WebSocket and HTTP, beyond which requests and upgrades get HTTP 503; 0 means no limit")
	f.IntVar(&o.cfg.MaxRoomsPerConn, "max-rooms-per-connection", o.cfg.MaxRoomsPerConn, "rooms one connection may be in at once")
	f.Float64Var(&o.cfg.RateLimit, "rate-limit", o.cfg.RateLimit, "chat messages per second one connection may send")
	f.IntVar(&o.cfg.RateBurst, "rate-burst", o.cfg.RateBurst, "messages one connection may send at once above --rate-limit")
	f.IntVar(&o.cfg.RateAbuse, "rate-abuse", o.cfg.RateAbuse, "refused messages tolerated (refilled at --rate-limit) before closing with 1008")
	f.Var(&o.maxQueue, "max-queue", "bytes queued for one slow client before it is closed with 1013")
	f.StringSliceVar(&o.cfg.AllowedOrigins, "allowed-origins", nil, "browser origins allowed besides the server's own, e.g. https://chat.example.com; * allows any")
	f.DurationVar(&o.cfg.ShutdownTimeout, "shutdown-timeout", o.cfg.ShutdownTimeout, "longest graceful shutdown before remaining connections are cut")
	f.DurationVar(&o.cfg.HandshakeTimeout, "handshake-timeout", o.cfg.HandshakeTimeout, "time allowed to send a request's line and headers (the upgrade request, a poll, any HTTP request)")
	f.DurationVar(&o.cfg.BodyTimeout, "http-body-timeout", o.cfg.BodyTimeout, "time allowed to send a request's body, after its headers (a POST); 0 means no limit")
	f.Var(&o.maxBody, "max-body-bytes", "largest request body (HTTP 413 beyond); 0 means --max-message-size plus 4 KiB")
	f.DurationVar(&o.cfg.PingInterval, "ping-interval", o.cfg.PingInterval, "ping connections idle this long")
	f.DurationVar(&o.cfg.PongTimeout, "pong-timeout", o.cfg.PongTimeout, "close connections silent this long")
	f.DurationVar(&o.cfg.CloseTimeout, "close-timeout", o.cfg.CloseTimeout, "wait this long for a client's close frame")
	f.DurationVar(&o.cfg.RoomGrace, "room-grace", o.cfg.RoomGrace, "keep an empty room, and its history, this long")
	f.StringVar(&o.metricsAdvertise, "metrics-advertise", "", "host:port at which the other nodes of a cluster reach this node's metrics (for their dashboards); default: --metrics-addr, with this host's name for an unspecified host")
	f.StringVar(&o.cfg.Redis, "redis", "", "Redis URL that ties nodes into a cluster: redis://host:port/db, or redis-cluster://host:port,host:port for a Redis Cluster; empty runs a single node")
	f.DurationVar(&o.cfg.RedisTTL, "redis-ttl", 24*time.Hour, "drop a room's history from Redis after this long without messages, and its seq and epoch too once no node has the room")
	f.StringVar(&o.roomOrder, "room-order", "", "removed: every room is ordered by its owner node (docs/cluster.md)")
	_ = f.MarkHidden("room-order") // out of --help; given, checkRoomOrder answers it
	f.DurationVar(&o.cfg.RedisLinger, "redis-linger", broker.DefaultLinger, "how long a message to a room shared with other nodes waits for others to go to Redis with it, at most 50ms: longer spends less CPU a message on the nodes and in Redis, and adds latency (docs/cluster.md)")
	f.DurationVar(&o.cfg.RedisMaxWait, "redis-max-wait", broker.DefaultMaxWait, "refuse messages to rooms shared with other nodes (error unavailable) while this node's messages to other nodes have waited longer than this to go out, and any message while 65,536 history writes are pending: past the cluster's capacity senders are told at once instead of every message queueing; 0 queues without bound (docs/cluster.md)")
	f.DurationVar(&o.cfg.RedisBalance, "redis-balance", 0, "every this long, cede rooms shared with other nodes to one of their followers while this node owns more of them than it follows, so that ownership evens out (two nodes: half each); 0 never does: the node that loads a room first owns it. Experimental: ceding under heavy traffic made a 16-core cluster refuse and drop clients at its knee (docs/cluster.md)")
	f.DurationVar(&o.cfg.HistoryLinger, "history-linger", broker.DefaultHistoryLinger, "how long the messages of rooms a node owns (and no other node follows: --history-linger-followed) wait to be written to Redis's history with others, at most 1s: longer spends less Redis CPU a message; a node that dies loses at most this much of history, and its rooms' members are told (docs/cluster.md)")
	f.DurationVar(&o.cfg.FollowedLinger, "history-linger-followed", broker.DefaultFollowedLinger, "how long the messages of rooms a node orders that other nodes follow wait to be written to Redis's history with others, at most 1s, never less than --history-linger: the followers hold them too and write what Redis lacks when the owner goes first, so history is lost only if the owner and all its followers go within it; longer spends less Redis CPU a message (docs/cluster.md); on NATS, how long every owned room's messages wait to be written to the history stream (docs/nats.md)")
	f.StringVar(&o.cfg.NATS.URL, "nats", "", "NATS servers that tie nodes into a cluster, nats://host:4222[,…] (JetStream on); empty runs a single node (or the Redis cluster of --redis). In progress (docs/nats.md)")
	f.StringVar(&o.cfg.NATS.User, "nats-user", "", "user name this node gives the NATS servers, with --nats-password")
	f.StringVar(&o.cfg.NATS.Password, "nats-password", "", "password of --nats-user (prefer the environment variable)")
	f.StringVar(&o.cfg.NATS.Token, "nats-token", "", "token this node gives the NATS servers (prefer the environment variable)")
	f.StringVar(&o.cfg.NATS.NKey, "nats-nkey", "", "file holding the NKey seed (SU…) this node signs in to NATS with")
	f.StringVar(&o.cfg.NATS.Creds, "nats-creds", "", "NATS credentials file (a user JWT and its NKey seed, as nsc writes it); one of --nats-user, --nats-token, --nats-nkey and --nats-creds at most")
	f.StringVar(&o.cfg.NATS.CA, "nats-ca", "", "PEM file of the CA that signed the NATS servers' certificates (default: the system's roots); turns TLS on, as a tls:// URL does")
	f.StringVar(&o.cfg.NATS.Cert, "nats-cert", "", "PEM client certificate this node shows the NATS servers, with --nats-key; turns TLS on")
	f.StringVar(&o.cfg.NATS.Key, "nats-key", "", "PEM private key of --nats-cert")
	f.IntVar(&o.cfg.NATS.Replicas, "nats-replicas", 1, "copies JetStream keeps of the rooms' records, the nodes' leases and the history: 1, or 3 on a NATS cluster of three servers or more")
	f.IntVar(&o.cfg.Loops, "loops", o.cfg.Loops, "event loops (threads serving connections); 0 means one per CPU (GOMAXPROCS)")
	f.DurationVar(&o.cfg.MaxLoopLag, "max-loop-lag", o.cfg.MaxLoopLag, "refuse chat messages (error unavailable) that an event loop reads after going longer than this, two passes in a row, without looking at its sockets: past the server's capacity senders are told at once instead of every message waiting in the kernel's buffers; it trades messages carried for latency (docs/capacity.md); 0 never refuses")
	f.StringVar(&o.jwtSecret, "auth-jwt-secret", "", "require a JWT signed with this HS256 secret (at least 16 bytes; prefer the environment variable)")
	f.StringVar(&o.jwtPublicKey, "auth-jwt-public-key", "", "require a JWT signed for this PEM public key file (RS256 or ES256)")
	f.StringVar(&o.jwksFile, "auth-jwks-file", "", "require a JWT signed by a key of this JWKS file (RS256 or ES256, chosen by kid)")
	f.StringVar(&o.cfg.APIKey, "api-key", "", "turn the server API on under /api/ (docs/api.md), for requests with this key (at least 16 bytes; prefer the environment variable or --api-key-file)")
	f.StringVar(&o.apiKeyFile, "api-key-file", "", "file holding the API key (surrounding white space ignored): the server API without the key on the command line")
	f.StringVar(&o.cfg.Webhook.URL, "webhook-url", "", "POST room and user events (occupied, vacated, joined, left, online, offline) to this http(s) URL, once per cluster, in order, signed (docs/hooks.md)")
	f.StringVar(&o.cfg.Webhook.Secret, "webhook-secret", "", "HMAC-SHA256 key of each webhook request's X-Scalechat-Signature (at least 16 bytes; prefer the environment variable)")
	f.BoolVar(&o.cfg.Webhook.Publish, "webhook-publish", false, "also send a message_published event for every message of the rooms whose namespace has no webhooks key (docs/config.md)")
	f.DurationVar(&o.cfg.Webhook.Timeout, "webhook-timeout", 5*time.Second, "time allowed to one webhook request; a failed one is retried with backoff")
	f.IntVar(&o.cfg.Webhook.Queue, "webhook-queue", 100000, "webhook events waiting (a cluster: in Redis, and changes on a node cut off from it) beyond which new ones are dropped, counted and logged")
	f.Var(&o.webhookQueueBytes, "webhook-queue-bytes", "bytes the webhook events waiting may hold (messages included) beyond which new ones are dropped, counted and logged, like --webhook-queue")
	f.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate (chain) file: serve https:// and wss:// (TLS 1.2+)")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	f.IntVar(&o.cfg.MaxConnsPerIP, "max-connections-per-ip", 0, "open connections, WebSocket and HTTP, from one address (HTTP 429 beyond); 0 means no limit")
	f.Float64Var(&o.cfg.ConnectRatePerIP, "connect-rate-per-ip", 0, "upgrade attempts per second from one address (burst twice that); 0 means no limit")
	f.DurationVar(&o.cfg.FrameTimeout, "frame-timeout", o.cfg.FrameTimeout, "a frame or message begun must arrive whole within this (slowloris); 0 means no limit")
	f.DurationVar(&o.cfg.FirstFrameTimeout, "first-frame-timeout", 0, "close connections that send no frame within this; 0 means never (listen-only clients are normal)")
	f.IntVar(&o.cfg.MaxRooms, "max-rooms", 0, "rooms this node holds at most; 0 means no limit")
	f.Var(&o.maxHistory, "max-history-bytes", "bytes of history this node keeps at most, the busiest rooms giving back their oldest messages; 0 means no limit")
	f.BoolVar(&o.cfg.Compression, "compression", false, "accept permessage-deflate (RFC 7692) from clients that offer it: a broadcast is compressed once for all of them; costs CPU, saves bytes")
	f.Var(&o.echoMaxMsg, "echo-max-message-size", "largest message on /echo (conformance suites send up to 16 MiB); with --echo-endpoint each event loop's read buffer grows to hold one")
	f.BoolVar(&o.cfg.EchoEndpoint, "echo-endpoint", false, "serve /echo, a WebSocket that echoes every message (for conformance suites and loadtest --protocol echo)")
	f.StringVar(&o.cfg.Hooks.ConnectURL, "hook-connect", "", "URL of the application's connect hook: asked before each WebSocket upgrade whether the client may connect, and who it is (docs/hooks.md)")
	f.StringVar(&o.cfg.Hooks.JoinURL, "hook-join", "", "URL of the application's join hook: asked whether a connection may join a room (docs/hooks.md)")
	f.StringVar(&o.cfg.Hooks.PublishURL, "hook-publish", "", "URL of the application's publish hook: asked whether a chat message may be published, or what to publish instead (docs/hooks.md)")
	f.StringVar(&o.cfg.Hooks.Secret, "hook-secret", "", "shared secret signing every hook request's body (HMAC-SHA256, header X-Scalechat-Signature; at least 16 bytes; prefer the environment variable)")
	f.DurationVar(&o.cfg.Hooks.Timeout, "hook-timeout", hooks.DefaultTimeout, "longest wait for a hook's answer; a call without an answer fails")
	f.StringVar(&o.hookFail, "hook-fail", "closed", "what a failed hook call (no answer, an error) decides: closed refuses, open allows")
	for k, name := range []string{"connect", "join", "publish"} {
		f.StringVar(&o.hookFailEach[k], "hook-fail-"+name, "", "--hook-fail for the "+name+" hook alone: open or closed")
	}
	f.IntVar(&o.cfg.Hooks.Failures, "hook-breaker-failures", hooks.DefaultFailures, "failed calls in a row that open a hook's circuit: then it fails at once, without calling, for --hook-breaker-cooldown")
	f.DurationVar(&o.cfg.Hooks.Cooldown, "hook-breaker-cooldown", hooks.DefaultCooldown, "how long an open circuit stays open before one trial call")
	f.IntVar(&o.cfg.Hooks.Workers, "hook-workers", hooks.DefaultWorkers, "join and publish hook calls in flight at once (each a kept-alive connection to the backend), and connect hook calls; at most 4096")
	f.StringVar(&o.logLevel, "log-level", o.logLevel, "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", o.logFormat, "text or json")
	o.config.define(f)
}

// runServe runs the chat server, and its metrics listener unless it is
// turned off, until the command's context ends.
func runServe(cmd *cobra.Command, o *serveFlags) error {
	logger, err := newLogger(cmd.ErrOrStderr(), o.logLevel, o.logFormat)
	if err != nil { // configErrors says so, with the others
		logger = slog.New(slog.DiscardHandler)
	}
	if errs := o.configErrors(cmd, logger); len(errs) > 0 {
		return invalidConfig(cmd.ErrOrStderr(), o.config.path, errs)
	}
	srv, err := server.New(o.cfg)
	if err != nil {
		return err
	}
	return serveUntilDone(cmd, o, srv, logger)
}

// serverConfig completes o.cfg from the flags that are not its fields
// (sizes, keys and certificates read from files, the namespaces), and
// returns every error of those flags, joined.
func (o *serveFlags) serverConfig(logger *slog.Logger) error {
	var errs []error
	o.cfg.MaxMessageSize, o.cfg.MaxQueue, o.cfg.Logger = int(o.maxMsg), int(o.maxQueue), logger
	o.cfg.Namespaces = o.config.file.namespaces
	o.cfg.EchoMaxMessage = int(o.echoMaxMsg)
	o.cfg.MaxHistoryBytes = int64(o.maxHistory)
	o.cfg.MaxBodyBytes = int64(o.maxBody)
	o.cfg.Webhook.QueueBytes = int64(o.webhookQueueBytes)
	var err error
	if o.cfg.Auth, err = verifier(o.jwtSecret, o.jwtPublicKey, o.jwksFile); err != nil {
		errs = append(errs, err)
	}
	if o.cfg.TLS, err = tlsConfig(o.tlsCert, o.tlsKey); err != nil {
		errs = append(errs, err)
	}
	if err := o.hookModes(); err != nil {
		errs = append(errs, err)
	}
	if err := o.readAPIKey(); err != nil {
		errs = append(errs, err)
	}
	if err := checkRoomOrder(o.roomOrder, logger); err != nil {
		errs = append(errs, err)
	}
	// The server takes 0 for 1 too; the flag says what it means.
	if r := o.cfg.NATS.Replicas; r != 1 && r != 3 {
		errs = append(errs, fmt.Errorf("--nats-replicas must be 1 or 3, got %d", r))
	}
	return errors.Join(errs...)
}

// checkRoomOrder answers the removed --room-order: owner, what every node
// does now, is accepted with a warning to drop the flag; redis, the order
// removed, is refused in one sentence, since a node that starts anyway
// would not do what its operator asked.
func checkRoomOrder(order string, logger *slog.Logger) error {
	switch order {
	case "":
		return nil
	case "owner":
		logger.Warn("--room-order is deprecated and does nothing: every room is ordered by its owner node; drop the flag")
		return nil
	case "redis":
		return errors.New("--room-order redis: the Redis room order was removed in d4ba8b2; every room is ordered by its owner node (docs/cluster.md)")
	}
	return fmt.Errorf("--room-order %q: the flag was removed; every room is ordered by its owner node (docs/cluster.md)", order)
}

// readAPIKey sets the API key from --api-key-file.
func (o *serveFlags) readAPIKey() error {
	if o.apiKeyFile == "" {
		return nil
	}
	if o.cfg.APIKey != "" {
		return errors.New("give the API key once: --api-key or --api-key-file, not both")
	}
	b, err := os.ReadFile(o.apiKeyFile)
	if err != nil {
		return fmt.Errorf("cannot read the API key: %w", err)
	}
	o.cfg.APIKey = strings.TrimSpace(string(b))
	return nil
}

// serveUntilDone runs srv, and its metrics listener unless it is turned off, until
// the command's context ends.
func serveUntilDone(cmd *cobra.Command, o *serveFlags, srv *server.Server, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", o.addr, err)
	}
	scheme := "http"
	if o.cfg.TLS != nil {
		scheme = "https"
	}
	logger.Info("scalechat listening", "url", scheme+"://"+ln.Addr().String()+"/",
		"websocket", strings.Replace(scheme, "http", "ws", 1)+"://"+ln.Addr().String()+"/ws/{room}",
		"auth", o.cfg.Auth != nil)
	node := nodeName(ln.Addr())
	if o.metricsAddr == "" {
		srv.SetNodeName(node)
		return srv.Serve(cmd.Context(), ln)
	}
	mln, err := net.Listen("tcp", o.metricsAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("cannot listen on %s for metrics: %w", o.metricsAddr, err)
	}
	logger.Info("metrics listening", "metrics", "http://"+mln.Addr().String()+"/metrics", "dashboard", "http://"+mln.Addr().String()+"/dashboard")
	m := metrics.New(srv, metrics.Options{Node: node, Logger: logger})
	// In a cluster, every node's dashboard shows every node.
	srv.Announce(node, "http://"+advertised(o.metricsAdvertise, mln.Addr())+"/metrics")
	// The metrics outlive the chat server's graceful shutdown, so
	// that it can be watched to the end.
	mctx, stopMetrics := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.Serve(mctx, mln); err != nil {
			logger.Error("metrics stopped", "err", err)
		}
	})
	err = srv.Serve(cmd.Context(), ln)
	stopMetrics()
	wg.Wait()
	return err
}

const serveLong = `Run the chat server: WebSocket rooms at /ws/{room} (GET /ws joins "lobby"), the browser
chat page at /, /healthz (process alive) and /readyz (accepting clients), and with
--api-key the server API for backends under /api/ (docs/api.md), and with --hook-* the
application's backend deciding who connects, joins and publishes (docs/hooks.md). On a listener of
its own (--metrics-addr), so that it answers while the chat port is saturated: Prometheus
metrics at /metrics and a live dashboard at /dashboard.

Single node, no external service. SIGINT or SIGTERM shut it down gracefully: /readyz fails,
new connections are refused, every client gets close 1001 after the messages already
accepted, and the process exits 0 within --shutdown-timeout.

Every flag has an environment variable twin, e.g. --addr and SCALECHAT_ADDR, and a key of
the same name in the file of --config (YAML, docs/config.md), which also holds the room
namespaces: a room called ns:name takes namespace ns's options (history, presence, who
publishes, tokens to join, max members). A flag wins over its variable, which wins over
the file. --check-config validates a file and exits: 0 valid, 2 not, one line per error.`

// hookModes sets each hook's failure mode from --hook-fail and its own
// flag.
func (o *serveFlags) hookModes() error {
	all, err := hooks.ParseMode(o.hookFail)
	if err != nil {
		return fmt.Errorf("--hook-fail: %w", err)
	}
	o.cfg.Hooks.SetFail(all)
	for k, v := range o.hookFailEach {
		if v == "" {
			continue
		}
		if o.cfg.Hooks.Fail[k], err = hooks.ParseMode(v); err != nil {
			return fmt.Errorf("--hook-fail-%s: %w", hooks.Kind(k), err)
		}
	}
	return nil
}

// nodeName names this node on the dashboard: host name and chat port.
func nodeName(addr net.Addr) string {
	host, err := os.Hostname()
	tcp, ok := addr.(*net.TCPAddr)
	if err != nil || !ok {
		return addr.String()
	}
	return net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}

func newLogger(w interface{ Write([]byte) (int, error) }, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q is not text or json", format)
}

// verifier builds the token verifier of at most one of the auth flags.
func verifier(secret, publicKey, jwks string) (*auth.Verifier, error) {
	set := 0
	for _, v := range []string{secret, publicKey, jwks} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 0:
		return nil, nil
	case set > 1:
		return nil, errors.New("use only one of --auth-jwt-secret, --auth-jwt-public-key and --auth-jwks-file")
	case secret != "":
		return auth.NewHS256([]byte(secret))
	case publicKey != "":
		b, err := os.ReadFile(publicKey)
		if err != nil {
			return nil, fmt.Errorf("read the JWT public key: %w", err)
		}
		return auth.NewPublicKey(b)
	}
	b, err := os.ReadFile(jwks)
	if err != nil {
		return nil, fmt.Errorf("read the JWKS file: %w", err)
	}
	return auth.NewJWKS(b)
}

// tlsConfig loads the certificate for TLS, or returns nil without one.
func tlsConfig(cert, key string) (*tls.Config, error) {
	if cert == "" && key == "" {
		return nil, nil
	}
	if cert == "" || key == "" {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("load the TLS certificate: %w", err)
	}
	// HTTP/1.1 only: a WebSocket upgrade needs it (RFC 6455), and browsers
	// would otherwise pick HTTP/2 for the page.
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// advertised is the address other nodes use to reach a listener at addr:
// the flag's value when set, else addr, with the host name in place of an
// unspecified address (0.0.0.0, ::).
func advertised(flag string, addr net.Addr) string {
	if flag != "" {
		return flag
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	host, err := os.Hostname()
	if err != nil {
		return addr.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
