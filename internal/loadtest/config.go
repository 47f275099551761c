//go:build linux

package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/scrape"
	"github.com/scalechat/scalechat/internal/slo"
)

// Protocols a run can speak.
const (
	ProtocolScalechat  = "scalechat"  // docs/protocol.md with its control frames: rooms, joined frames, broadcast
	ProtocolLegacy     = "legacy"     // the original five-field JSON: room from the URL, chat frames only
	ProtocolCentrifugo = "centrifugo" // the Centrifugo client protocol over JSON: connect, subscribe, publish
	ProtocolEcho       = "echo"       // any WebSocket echo server: each client gets its own messages back
	ProtocolSocketIO   = "socketio"   // Socket.IO v5 over Engine.IO v4 WebSockets: join and chat events (docs/loadtest.md)
	// ProtocolChat is the former name of ProtocolScalechat, still accepted.
	ProtocolChat = "chat"
)

// Transports a chat run's clients can use.
const (
	TransportWS   = "ws"   // one WebSocket per client, on the event loops
	TransportPoll = "poll" // HTTP: POST per message, GET /rooms/{room}/messages to receive (long or plain polling)
)

// DefaultPollWait is how long a long poll asks the server to wait.
const DefaultPollWait = 25 * time.Second

// Duration is a time.Duration written as "1.5s" in YAML and JSON.
type Duration = results.Duration

// Step is one phase of a scenario: a population of clients that connect,
// join their rooms, send for Duration, drain and disconnect.
type Step struct {
	Name           string   `yaml:"name" json:"name"`
	Rooms          int      `yaml:"rooms" json:"rooms"`
	RoomSize       int      `yaml:"room_size" json:"room_size"`
	RoomsPerClient int      `yaml:"rooms_per_client" json:"rooms_per_client"`
	RoomSkew       float64  `yaml:"room_skew" json:"room_skew"`
	MsgFrequency   Duration `yaml:"msg_frequency" json:"msg_frequency"`
	MsgSize        int      `yaml:"msg_size" json:"msg_size"`
	Duration       Duration `yaml:"duration" json:"duration"`
	Ramp           float64  `yaml:"ramp" json:"ramp"`
	Drain          Duration `yaml:"drain" json:"drain"`
	// NumClients, when positive, sets the clients of the step (spread evenly
	// over the rooms) instead of Rooms × RoomSize, for shapes such as 4,000
	// clients over 10,000 rooms.
	NumClients int `yaml:"clients" json:"clients,omitempty"`
	// Senders, when positive, is how many of the clients send (spread evenly
	// over the step's clients); the others only receive. 0: all send.
	Senders int `yaml:"senders" json:"senders,omitempty"`
}

// DefaultStep is the step of `scalechat loadtest` without flags: 1 room of
// 10 clients, a 256-byte message a second each for 30 s, 1,000 connects a
// second, 3 s of drain. Scenario files fill in from it what they leave out.
func DefaultStep() Step {
	return Step{Name: "s1", Rooms: 1, RoomSize: 10, RoomsPerClient: 1, MsgFrequency: Duration(time.Second), MsgSize: 256,
		Duration: Duration(30 * time.Second), Ramp: 1000, Drain: Duration(3 * time.Second)}
}

// Clients is the number of clients of the step (all shards and workers).
func (s Step) Clients() int {
	if s.NumClients > 0 {
		return s.NumClients
	}
	return s.Rooms * s.RoomSize
}

var stepNameRE = regexp.MustCompile(`^[^,"\r\n]{1,64}$`)

func (s Step) validate() error {
	switch {
	case !stepNameRE.MatchString(s.Name):
		return fmt.Errorf("step name %q must be 1-64 characters without comma, quote or newline", s.Name)
	case s.Rooms < 1:
		return fmt.Errorf("step %s: rooms must be at least 1", s.Name)
	case s.NumClients == 0 && s.RoomSize < 1:
		return fmt.Errorf("step %s: room size must be at least 1", s.Name)
	case s.NumClients < 0:
		return fmt.Errorf("step %s: clients must not be negative", s.Name)
	case s.Clients() >= 1<<31:
		return fmt.Errorf("step %s: %d clients is too many", s.Name, s.Clients())
	case s.RoomsPerClient < 1 || s.RoomsPerClient > s.Rooms:
		return fmt.Errorf("step %s: rooms per client must be between 1 and the number of rooms (%d)", s.Name, s.Rooms)
	case s.Senders < 0 || s.Senders > s.Clients():
		return fmt.Errorf("step %s: senders must be between 0 (all) and the number of clients (%d)", s.Name, s.Clients())
	case s.RoomSkew < 0:
		return fmt.Errorf("step %s: room skew must not be negative", s.Name)
	case s.MsgFrequency < 0:
		return fmt.Errorf("step %s: message frequency must not be negative", s.Name)
	case s.MsgFrequency > 0 && s.MsgFrequency.D() < 100*time.Microsecond:
		return fmt.Errorf("step %s: message frequency must be at least 100µs per client", s.Name)
	case s.MsgSize < 0 || s.MsgSize > 1<<20:
		return fmt.Errorf("step %s: message size must be between 0 and 1 MiB", s.Name)
	case s.Duration <= 0:
		return fmt.Errorf("step %s: duration must be positive", s.Name)
	case s.Ramp <= 0:
		return fmt.Errorf("step %s: ramp must be positive (connections per second)", s.Name)
	case s.Drain < 0:
		return fmt.Errorf("step %s: drain must not be negative", s.Name)
	}
	return nil
}

// Config is everything one run needs. A parent process hands it to its
// workers unchanged, with Part set.
type Config struct {
	URL            string        `json:"url"`
	Protocol       string        `json:"protocol"`
	Scenario       string        `json:"scenario,omitempty"` // name of the scenario file's scenario, if any
	Steps          []Step        `json:"steps"`
	Pause          Duration      `json:"pause"`
	RoomPrefix     string        `json:"room_prefix"`
	Seed           uint64        `json:"seed"`
	SourceIPs      []netip.Addr  `json:"source_ips,omitempty"`
	Workers        int           `json:"workers"`
	Shard          int           `json:"shard"`
	Shards         int           `json:"shards"`
	Loops          int           `json:"loops"`
	MaxLoss        float64       `json:"max_loss"`
	MaxUnexpected  int64         `json:"max_unexpected"`
	Namespace      string        `json:"namespace,omitempty"` // centrifugo: channels are NAMESPACE:ROOM; socketio: the namespace ("" or "/" for the main one)
	ConnectTimeout Duration      `json:"connect_timeout"`
	Out            string        `json:"out"`
	Args           []string      `json:"args"`
	Worker         int           `json:"worker"`                   // index of this worker process, when Workers > 1
	NoRecord       bool          `json:"no_record,omitempty"`      // no CSV and no meta.json (benchmarks of the generator)
	NoCSV          bool          `json:"no_csv,omitempty"`         // no CSV, meta.json still written
	Compression    bool          `json:"compression,omitempty"`    // offer permessage-deflate (WebSocket transport)
	ServerMetrics  []string      `json:"server_metrics,omitempty"` // servers' /metrics URLs the parent scrapes into <out>.server.csv
	ServerPIDs     []int         `json:"server_pids,omitempty"`    // local server processes whose CPU and RSS the parent reads from /proc into it
	Progress       time.Duration `json:"-"`                        // progress interval; 0 = 1s
	// Transport is TransportWS (default) or TransportPoll.
	Transport string `json:"transport,omitempty"`
	// PollInterval, with TransportPoll, makes clients poll without wait
	// every interval (plain polling); 0 means long polling.
	PollInterval Duration `json:"poll_interval,omitempty"`
	// PollWait is the wait of a long poll; 0 means DefaultPollWait.
	PollWait Duration `json:"poll_wait,omitempty"`

	// SLO are the objectives judged on each step at the end (the parent
	// judges them; workers do not need them).
	SLO []slo.Objective `json:"-"`
}

// WatchesServers reports whether the run records the servers' figures
// (<out>.server.csv): from their /metrics or their /proc.
func (c *Config) WatchesServers() bool { return len(c.ServerMetrics) > 0 || len(c.ServerPIDs) > 0 }

var roomPrefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,40}$`)

// Validate checks the configuration and fills defaults for zero fields.
func (c *Config) Validate() error {
	if c.Protocol == "" || c.Protocol == ProtocolChat {
		c.Protocol = ProtocolScalechat
	}
	switch c.Protocol {
	case ProtocolScalechat, ProtocolEcho, ProtocolCentrifugo, ProtocolSocketIO:
	case ProtocolLegacy:
		for _, s := range c.Steps {
			if s.RoomsPerClient > 1 {
				return errors.New("--protocol legacy puts a client in the room of its URL only: --rooms-per-client must be 1")
			}
		}
	default:
		return fmt.Errorf("protocol %q is not scalechat, legacy, centrifugo, socketio or echo", c.Protocol)
	}
	if c.MaxUnexpected < 0 {
		return errors.New("--max-unexpected must not be negative")
	}
	if c.Transport == "" {
		c.Transport = TransportWS
	}
	switch c.Transport {
	case TransportWS:
		if _, err := parseTarget(c.URL); err != nil {
			return err
		}
	case TransportPoll:
		if c.Protocol != ProtocolScalechat {
			return errors.New("--transport poll speaks scalechat's protocol only")
		}
		if c.Compression {
			return errors.New("--compression is a WebSocket extension: it needs --transport ws")
		}
		if _, err := parsePollTarget(c.URL); err != nil {
			return err
		}
		if c.PollInterval < 0 {
			return errors.New("poll interval must not be negative")
		}
		if c.PollWait == 0 {
			c.PollWait = Duration(DefaultPollWait)
		}
		if c.PollWait < 0 || c.PollWait.D() > 60*time.Second {
			return errors.New("poll wait must be between 0 and 60s (the server's maximum)")
		}
		for _, s := range c.Steps {
			if s.RoomsPerClient > 1 {
				return fmt.Errorf("step %s: --transport poll runs one room per client (a poll reads one room)", s.Name)
			}
		}
	default:
		return fmt.Errorf("transport %q is not ws or poll", c.Transport)
	}
	for _, u := range c.ServerMetrics {
		if err := scrape.CheckURL(u); err != nil {
			return err
		}
	}
	for _, pid := range c.ServerPIDs {
		if _, err := procstat.Read(pid); pid <= 0 || err != nil {
			return fmt.Errorf("--server-pid %d is not a process of this machine (its CPU is read from /proc/%d/stat)", pid, pid)
		}
	}
	if len(c.Steps) == 0 {
		return errors.New("no steps to run")
	}
	names := map[string]bool{}
	for _, s := range c.Steps {
		if err := s.validate(); err != nil {
			return err
		}
		if names[s.Name] {
			return fmt.Errorf("two steps are named %q", s.Name)
		}
		names[s.Name] = true
	}
	if !roomPrefixRE.MatchString(c.RoomPrefix) {
		return fmt.Errorf("room prefix %q must be 1-40 characters of A-Z a-z 0-9 . _ -", c.RoomPrefix)
	}
	if c.Workers < 1 {
		c.Workers = 1
	}
	if c.Shards < 1 {
		c.Shards = 1
	}
	if c.Shard < 0 || c.Shard >= c.Shards {
		return fmt.Errorf("shard %d/%d: the index must be between 0 and %d", c.Shard, c.Shards, c.Shards-1)
	}
	if c.Worker < 0 || c.Worker >= c.Workers {
		return fmt.Errorf("worker %d of %d does not exist", c.Worker, c.Workers)
	}
	if c.Loops < 1 {
		return errors.New("loops must be at least 1")
	}
	if c.MaxLoss < 0 || c.MaxLoss > 1 {
		return errors.New("max loss must be between 0 and 1")
	}
	if c.ConnectTimeout <= 0 {
		return errors.New("connect timeout must be positive")
	}
	return nil
}

// Parts is the number of processes the scenario's clients are split over.
func (c *Config) Parts() int { return c.Shards * c.Workers }

// Part is this process's index among Parts.
func (c *Config) Part() int { return c.Shard*c.Workers + c.Worker }

// target is the parsed --url.
type target struct {
	host string         // Host header
	addr netip.AddrPort // where to connect
	path string         // path prefix (room is appended as /{room} in chat mode)
	raw  string
}

func parseTarget(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return target{}, fmt.Errorf("url %q is not a ws:// URL", raw)
	}
	if u.Scheme != "ws" {
		return target{}, fmt.Errorf("url %q: only ws:// is supported (no TLS)", raw)
	}
	host := u.Host
	port := u.Port()
	if port == "" {
		port = "80"
		host = u.Hostname()
	}
	hn := u.Hostname()
	if hn == "localhost" {
		hn = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(hn)
	if err != nil {
		// A name (a Kubernetes Service, a compose service): resolve it once,
		// as every connection of the run goes to the same address.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", hn)
		cancel()
		if lerr != nil || len(ips) == 0 {
			return target{}, fmt.Errorf("url %q: cannot resolve %s: %w", raw, hn, lerr)
		}
		ip = ips[0].Unmap()
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(ip.String(), port))
	if err != nil {
		return target{}, fmt.Errorf("url %q: bad port", raw)
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return target{host: host, addr: ap, path: p, raw: raw}, nil
}

// pollTarget is the parsed --url of the HTTP transport: requests go to
// base + "/rooms/{room}/messages", with query (e.g. a token) kept. A host
// name is resolved by net/http, as a polling client's would be.
type pollTarget struct {
	base  string
	query string
}

func parsePollTarget(raw string) (pollTarget, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Scheme != "http" {
		return pollTarget{}, fmt.Errorf("url %q: --transport poll needs an http:// URL of the server, e.g. http://127.0.0.1:8080", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return pollTarget{}, fmt.Errorf("url %q: bad port", raw)
		}
	}
	return pollTarget{base: "http://" + u.Host + strings.TrimSuffix(u.EscapedPath(), "/"), query: u.RawQuery}, nil
}

// roomURL is the messages URL of room, with extra query parameters.
func (t pollTarget) roomURL(room, extra string) string {
	q := t.query
	if extra != "" {
		if q != "" {
			q += "&"
		}
		q += extra
	}
	u := t.base + "/rooms/" + room + "/messages"
	if q != "" {
		u += "?" + q
	}
	return u
}

// roomPath returns the request path for a client whose URL room is room.
func (t target) roomPath(room string) string {
	p, q, _ := strings.Cut(t.path, "?")
	p = strings.TrimSuffix(p, "/") + "/" + room
	if q != "" {
		p += "?" + q
	}
	return p
}

// ParseSourceIPs reads a list such as "127.0.0.1-127.0.0.4,127.0.0.9".
func ParseSourceIPs(s string) ([]netip.Addr, error) {
	if s == "" {
		return nil, nil
	}
	var out []netip.Addr
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := netip.ParseAddr(lo)
		if err != nil {
			return nil, fmt.Errorf("source address %q is not an IP address", lo)
		}
		if !isRange {
			out = append(out, a)
			continue
		}
		b, err := netip.ParseAddr(hi)
		if err != nil || b.Less(a) || a.Is4() != b.Is4() {
			return nil, fmt.Errorf("source range %q is not a range of IP addresses", part)
		}
		for x := a; ; x = x.Next() {
			out = append(out, x)
			if len(out) > 4096 {
				return nil, fmt.Errorf("source range %q holds more than 4096 addresses", part)
			}
			if x == b {
				break
			}
		}
	}
	return out, nil
}

// ParseShard reads "i/N".
func ParseShard(s string) (i, n int, err error) {
	if _, err := fmt.Sscanf(s, "%d/%d", &i, &n); err != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("shard %q must be i/N with 0 <= i < N", s)
	}
	return i, n, nil
}
