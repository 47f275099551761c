//go:build linux

// Package server is scalechat's chat server: HTTP endpoints, the WebSocket
// upgrade, and the event loops that own every connection after it.
//
// The path of a message: loop.onReadable reads the socket, conn.process cuts
// frames, conn.onMessage parses the JSON and calls room.Room.Publish, which
// queues the encoded frame for every loop with members of the room;
// loop.deliver appends it to each member's queue and loop.flush writes each
// queue with one writev.
package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/namespace"
)

// Config holds the server's settings. Zero values mean the defaults of
// DefaultConfig, except where a field says otherwise.
type Config struct {
	History           int            // messages kept per room; 0 disables history
	MaxMessageSize    int            // bytes of one client message
	MaxConnections    int            // 0: no limit
	MaxRoomsPerConn   int            // rooms one connection may be in
	RateLimit         float64        // chat messages per second per connection
	RateBurst         int            // messages allowed at once above the rate
	RateAbuse         int            // refused messages tolerated (refilled at RateLimit) before close 1008
	MaxQueue          int            // bytes queued for one connection before it is closed as a slow consumer
	AllowedOrigins    []string       // exact origins, or "*"; the page's own origin is always allowed
	ShutdownTimeout   time.Duration  // how long a graceful shutdown may take
	HandshakeTimeout  time.Duration  // to read a request's line and headers (upgrade or not) and write the upgrade's answer
	BodyTimeout       time.Duration  // to read a request's body, from the end of its headers; 0: no limit
	MaxBodyBytes      int64          // bytes of one request body; 0: MaxMessageSize plus 4 KiB
	PingInterval      time.Duration  // ping a connection idle this long
	PongTimeout       time.Duration  // close a connection silent this long
	CloseTimeout      time.Duration  // wait for the peer's close frame
	RoomGrace         time.Duration  // keep an empty room (and its history) this long
	Loops             int            // event loops; 0: GOMAXPROCS
	MaxLoopLag        time.Duration  // refuse chat messages a loop reads while it is this far behind its sockets; 0: never, the default (lag.go)
	Auth              *auth.Verifier // checks the token of every connection; nil: no authentication
	TLS               *tls.Config    // serve wss:// and https://; nil: plain TCP
	MaxConnsPerIP     int            // open connections from one address; 0: no limit
	ConnectRatePerIP  float64        // upgrade attempts per second from one address (burst: twice that); 0: no limit
	FrameTimeout      time.Duration  // a frame begun must arrive whole within this (slowloris); 0: no limit
	FirstFrameTimeout time.Duration  // a connection must send a first frame within this; 0: no limit (listen-only clients are normal)
	MaxRooms          int            // rooms held on this node; 0: no limit
	MaxHistoryBytes   int64          // bytes of history held on this node; 0: no limit
	EchoEndpoint      bool           // serve /echo: every message echoed, by the same connection layer
	EchoMaxMessage    int            // bytes of one message on /echo (conformance suites send 16 MiB)
	Compression       bool           // accept permessage-deflate offers (RFC 7692), without context takeover
	Redis             string         // redis://host:port/db ties nodes into a cluster; empty: a single node
	RedisTTL          time.Duration  // a room's keys in Redis expire after this long without messages; 0: 24h
	RedisLinger       time.Duration  // how long a publish to a room shared with other nodes waits for others, for one round to Redis; 0: broker.DefaultLinger
	RedisMaxWait      time.Duration  // refuse publishes to shared rooms while this node's messages to other nodes waited longer; 0: no bound
	RedisBalance      time.Duration  // how often the node cedes shared rooms while it owns more than it follows; 0: never
	HistoryLinger     time.Duration  // how long messages of rooms a node owns wait to be written to Redis's history with others; 0: broker.DefaultHistoryLinger
	FollowedLinger    time.Duration  // the same for rooms other nodes follow (they hold the messages too); 0: broker.DefaultFollowedLinger
	ProcessingTime    bool           // record Stats.Processing; false (the zero value) saves its clock reads
	APIKey            string         // turns the server API on under /api/ (docs/api.md); empty: off
	Hooks             hooks.Config   // the application's backend's connect, join and publish hooks (docs/hooks.md); no URL: off
	Namespaces        namespace.Set  // options of rooms named ns:name, by ns (docs/config.md); nil: none
	Webhook           WebhookConfig  // events POSTed to a backend (docs/hooks.md); URL empty: off
	Logger            *slog.Logger

	// NATS ties nodes into a cluster on NATS instead of Redis
	// (docs/nats.md): its URL (empty: off), authentication, TLS and
	// replicas. The broker's History, TTL, lingers, Room and Logger come
	// from the fields above (History, RedisTTL, RedisLinger,
	// HistoryLinger), not from here.
	NATS broker.NATSConfig
}

// DefaultConfig returns the defaults documented in --help.
func DefaultConfig() Config {
	return Config{
		History:          100,
		MaxMessageSize:   16 << 10,
		EchoMaxMessage:   16 << 20,
		MaxRoomsPerConn:  100,
		RateLimit:        20,
		RateBurst:        40,
		RateAbuse:        40,
		MaxQueue:         4 << 20,
		ShutdownTimeout:  10 * time.Second,
		HandshakeTimeout: 10 * time.Second,
		BodyTimeout:      10 * time.Second,
		PingInterval:     30 * time.Second,
		PongTimeout:      60 * time.Second,
		CloseTimeout:     5 * time.Second,
		RoomGrace:        30 * time.Second,
		FrameTimeout:     10 * time.Second,
		ProcessingTime:   true,
	}
}

func (c *Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.History >= 0, "history must not be negative")
	check(c.MaxMessageSize >= 64 && c.MaxMessageSize <= 64<<20, "max message size must be between 64 bytes and 64 MiB")
	check(c.EchoMaxMessage == 0 || c.EchoMaxMessage >= 64 && c.EchoMaxMessage <= 64<<20, "echo max message size must be between 64 bytes and 64 MiB")
	check(c.MaxConnections >= 0, "max connections must not be negative")
	check(c.MaxRoomsPerConn >= 1, "max rooms per connection must be at least 1")
	check(c.RateLimit > 0, "rate limit must be positive")
	check(c.RateBurst >= 1, "rate burst must be at least 1")
	check(c.RateAbuse >= 0, "rate abuse must not be negative")
	check(c.MaxQueue >= c.MaxMessageSize, "max queue must hold at least one message of max message size")
	check(c.ShutdownTimeout > 0, "shutdown timeout must be positive")
	check(c.HandshakeTimeout > 0, "handshake timeout must be positive")
	check(c.PingInterval > 0 && c.PongTimeout > c.PingInterval, "pong timeout must be longer than the (positive) ping interval")
	check(c.CloseTimeout > 0, "close timeout must be positive")
	check(c.RoomGrace >= 0, "room grace must not be negative")
	check(c.Redis == "" || c.NATS.URL == "", "the cluster runs on one engine: give --redis or --nats, not both")
	if c.NATS.URL != "" {
		errs = append(errs, unjoinErrors(c.NATS.Check())...)
	} else {
		check(c.NATS.Replicas == 0 || c.NATS.Replicas == 1 || c.NATS.Replicas == 3, "NATS replicas must be 1 or 3, got %d", c.NATS.Replicas)
	}
	check(c.RedisLinger >= 0 && c.RedisLinger <= broker.MaxLinger, "the Redis linger must be between 0 and %s", broker.MaxLinger)
	check(c.RedisMaxWait >= 0, "the Redis max wait must not be negative")
	check(c.RedisBalance >= 0, "the Redis balance interval must not be negative")
	check(c.HistoryLinger >= 0 && c.HistoryLinger <= broker.MaxHistoryLinger, "the history linger must be between 0 and %s", broker.MaxHistoryLinger)
	check(c.FollowedLinger >= 0 && c.FollowedLinger <= broker.MaxHistoryLinger, "the followed rooms' history linger must be between 0 and %s", broker.MaxHistoryLinger)
	check(c.Loops >= 0, "loops must not be negative")
	check(c.MaxLoopLag >= 0, "the max loop lag must not be negative")
	check(c.MaxConnsPerIP >= 0 && c.ConnectRatePerIP >= 0 && c.MaxRooms >= 0 && c.MaxHistoryBytes >= 0,
		"per-address limits, max rooms and max history bytes must not be negative")
	check(c.APIKey == "" || len(c.APIKey) >= MinAPIKey, "the API key must be at least %d bytes", MinAPIKey)
	check(c.FrameTimeout >= 0 && c.FirstFrameTimeout >= 0, "frame timeouts must not be negative")
	check(c.BodyTimeout >= 0, "the HTTP body timeout must not be negative")
	check(c.MaxBodyBytes == 0 || c.MaxBodyBytes > int64(c.MaxMessageSize), "max body bytes must be larger than max message size (a POST carries one message)")
	if err := c.Hooks.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.namespaceErrors()...)
	check(c.Webhook.URL == "" || hooks.ValidURL(c.Webhook.URL), "the webhook URL %q is not an http:// or https:// URL", c.Webhook.URL)
	check(c.Webhook.URL == "" || len(c.Webhook.Secret) >= MinAPIKey, "the webhook secret must be at least %d bytes", MinAPIKey)
	check(c.Webhook.Timeout >= 0 && c.Webhook.Queue >= 0 && c.Webhook.QueueBytes >= 0, "the webhook timeout and queue must not be negative")
	return errors.Join(errs...)
}

// clustered reports whether the node is one of a cluster: on Redis or on
// NATS.
func (c *Config) clustered() bool { return c.Redis != "" || c.NATS.URL != "" }

// engine names the cluster's engine, "redis" or "nats"; "" on a single
// node.
func (c *Config) engine() string {
	switch {
	case c.Redis != "":
		return "redis"
	case c.NATS.URL != "":
		return "nats"
	}
	return ""
}

// unjoinErrors returns the errors errors.Join joined, or err alone; none
// for nil.
func unjoinErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func (c *Config) fill() {
	if c.EchoMaxMessage == 0 {
		c.EchoMaxMessage = 16 << 20
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = int64(c.MaxMessageSize) + 4<<10
	}
	if c.Loops == 0 {
		c.Loops = runtime.GOMAXPROCS(0)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// largestMessage is the size of the largest message a connection may send:
// a loop's read buffer holds one whole frame of it.
func (c *Config) largestMessage() int {
	if c.EchoEndpoint {
		return max(c.MaxMessageSize, c.EchoMaxMessage)
	}
	return c.MaxMessageSize
}
