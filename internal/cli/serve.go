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

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/metrics"
	"github.com/scalechat/scalechat/internal/server"
)

func newServeCmd() *cobra.Command {
	cfg := server.DefaultConfig()
	var (
		jwtSecret, jwtPublicKey, jwksFile string
		tlsCert, tlsKey                   string
		maxHistory                        byteSize
		addr                              = "127.0.0.1:8080"
		metricsAddr                       = "127.0.0.1:8081"
		metricsAdvertise                  string
		maxMsg, maxQueue                  = byteSize(cfg.MaxMessageSize), byteSize(cfg.MaxQueue)
		logLevel, logFormat               = "info", "text"
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the chat server",
		Long: `Run the chat server: WebSocket rooms at /ws/{room} (GET /ws joins "lobby"), the browser
chat page at /, /healthz (process alive) and /readyz (accepting clients). On a listener of
its own (--metrics-addr), so that it answers while the chat port is saturated: Prometheus
metrics at /metrics and a live dashboard at /dashboard.

Single node, no external service. SIGINT or SIGTERM shut it down gracefully: /readyz fails,
new connections are refused, every client gets close 1001 after the messages already
accepted, and the process exits 0 within --shutdown-timeout.

Every flag has an environment variable twin, e.g. --addr and SCALECHAT_ADDR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(cmd.ErrOrStderr(), logLevel, logFormat)
			if err != nil {
				return err
			}
			cfg.MaxMessageSize, cfg.MaxQueue, cfg.Logger = int(maxMsg), int(maxQueue), logger
			cfg.MaxHistoryBytes = int64(maxHistory)
			if cfg.Auth, err = verifier(jwtSecret, jwtPublicKey, jwksFile); err != nil {
				return err
			}
			if cfg.TLS, err = tlsConfig(tlsCert, tlsKey); err != nil {
				return err
			}
			srv, err := server.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("cannot listen on %s: %w", addr, err)
			}
			scheme := "http"
			if cfg.TLS != nil {
				scheme = "https"
			}
			logger.Info("scalechat listening", "url", scheme+"://"+ln.Addr().String()+"/",
				"websocket", strings.Replace(scheme, "http", "ws", 1)+"://"+ln.Addr().String()+"/ws/{room}",
				"auth", cfg.Auth != nil)
			if metricsAddr == "" {
				return srv.Serve(cmd.Context(), ln)
			}
			mln, err := net.Listen("tcp", metricsAddr)
			if err != nil {
				ln.Close()
				return fmt.Errorf("cannot listen on %s for metrics: %w", metricsAddr, err)
			}
			logger.Info("metrics listening", "metrics", "http://"+mln.Addr().String()+"/metrics", "dashboard", "http://"+mln.Addr().String()+"/dashboard")
			node := nodeName(ln.Addr())
			m := metrics.New(srv, metrics.Options{Node: node, Logger: logger})
			// In a cluster, every node's dashboard shows every node.
			srv.Announce(node, "http://"+advertised(metricsAdvertise, mln.Addr())+"/metrics")
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", addr, "address to listen on, host:port")
	f.StringVar(&metricsAddr, "metrics-addr", metricsAddr, `address of the metrics listener (/metrics, /dashboard), host:port; "" turns metrics off`)
	f.IntVar(&cfg.History, "history", cfg.History, "messages kept per room and replayed to joining clients; 0 disables history")
	f.Var(&maxMsg, "max-message-size", "largest client message; larger ones close the connection with 1009")
	f.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "open connections beyond which upgrades get HTTP 503; 0 means no limit")
	f.IntVar(&cfg.MaxRoomsPerConn, "max-rooms-per-connection", cfg.MaxRoomsPerConn, "rooms one connection may be in at once")
	f.Float64Var(&cfg.RateLimit, "rate-limit", cfg.RateLimit, "chat messages per second one connection may send")
	f.IntVar(&cfg.RateBurst, "rate-burst", cfg.RateBurst, "messages one connection may send at once above --rate-limit")
	f.IntVar(&cfg.RateAbuse, "rate-abuse", cfg.RateAbuse, "refused messages tolerated (refilled at --rate-limit) before closing with 1008")
	f.Var(&maxQueue, "max-queue", "bytes queued for one slow client before it is closed with 1013")
	f.StringSliceVar(&cfg.AllowedOrigins, "allowed-origins", nil, "browser origins allowed besides the server's own, e.g. https://chat.example.com; * allows any")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "longest graceful shutdown before remaining connections are cut")
	f.DurationVar(&cfg.HandshakeTimeout, "handshake-timeout", cfg.HandshakeTimeout, "time allowed to send the upgrade request")
	f.DurationVar(&cfg.PingInterval, "ping-interval", cfg.PingInterval, "ping connections idle this long")
	f.DurationVar(&cfg.PongTimeout, "pong-timeout", cfg.PongTimeout, "close connections silent this long")
	f.DurationVar(&cfg.CloseTimeout, "close-timeout", cfg.CloseTimeout, "wait this long for a client's close frame")
	f.DurationVar(&cfg.RoomGrace, "room-grace", cfg.RoomGrace, "keep an empty room, and its history, this long")
	f.StringVar(&metricsAdvertise, "metrics-advertise", "", "host:port at which the other nodes of a cluster reach this node's metrics (for their dashboards); default: --metrics-addr, with this host's name for an unspecified host")
	f.StringVar(&cfg.Redis, "redis", "", "Redis URL (redis://host:port/db) that ties nodes into a cluster; empty runs a single node")
	f.DurationVar(&cfg.RedisTTL, "redis-ttl", 24*time.Hour, "drop a room's seq and history from Redis after this long without messages")
	f.IntVar(&cfg.Loops, "loops", cfg.Loops, "event loops (threads serving connections); 0 means one per CPU (GOMAXPROCS)")
	f.StringVar(&jwtSecret, "auth-jwt-secret", "", "require a JWT signed with this HS256 secret (at least 16 bytes; prefer the environment variable)")
	f.StringVar(&jwtPublicKey, "auth-jwt-public-key", "", "require a JWT signed for this PEM public key file (RS256 or ES256)")
	f.StringVar(&jwksFile, "auth-jwks-file", "", "require a JWT signed by a key of this JWKS file (RS256 or ES256, chosen by kid)")
	f.StringVar(&tlsCert, "tls-cert", "", "PEM certificate (chain) file: serve https:// and wss:// (TLS 1.2+)")
	f.StringVar(&tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	f.IntVar(&cfg.MaxConnsPerIP, "max-connections-per-ip", 0, "open connections from one address; 0 means no limit")
	f.Float64Var(&cfg.ConnectRatePerIP, "connect-rate-per-ip", 0, "upgrade attempts per second from one address (burst twice that); 0 means no limit")
	f.DurationVar(&cfg.FrameTimeout, "frame-timeout", cfg.FrameTimeout, "a frame or message begun must arrive whole within this (slowloris); 0 means no limit")
	f.DurationVar(&cfg.FirstFrameTimeout, "first-frame-timeout", 0, "close connections that send no frame within this; 0 means never (listen-only clients are normal)")
	f.IntVar(&cfg.MaxRooms, "max-rooms", 0, "rooms this node holds at most; 0 means no limit")
	f.Var(&maxHistory, "max-history-bytes", "bytes of history this node keeps at most, the busiest rooms giving back their oldest messages; 0 means no limit")
	f.BoolVar(&cfg.EchoEndpoint, "echo-endpoint", false, "serve /echo, a WebSocket that echoes every message (for conformance suites and loadtest --protocol echo)")
	f.StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", logFormat, "text or json")
	bindEnv(cmd)
	return cmd
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
