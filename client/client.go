// Package client is the Go client of scalechat (docs/protocol.md): it
// connects to a room, delivers what the server sends as typed events, sends
// chat messages, joins and leaves more rooms over the same connection, and
// survives broken connections.
//
// On any disconnect other than Close it reconnects with exponential backoff
// and jitter, and asks for every room again with since = the last seq it
// received there (the URL room with ?since=, the others with join frames),
// so it misses no message still in the server's history and, since it drops
// every message whose seq it has already passed, delivers none twice.
// Messages sent on a connection that broke before their echo came back are
// written again once the missed messages have been replayed, unless the
// replay holds their echo: each message reaches the room once as long as the
// history covers the outage.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/scalechat/scalechat/internal/protocol"
)

// Errors returned by the Client's methods.
var (
	ErrClosed        = errors.New("client closed")
	ErrNotJoined     = errors.New("not in that room")
	ErrAlreadyJoined = errors.New("already in that room")
)

// MaxSendAttempts is how many connections a message is written on before
// the client gives up on it (with an Error event of code CodeNotSent).
const MaxSendAttempts = 3

// Config configures a Client. Only URL is required.
type Config struct {
	// URL is the server's WebSocket endpoint, e.g. ws://127.0.0.1:8080/ws;
	// the room is appended to its path. http and https URLs are taken as ws
	// and wss; an empty path means /ws.
	URL string
	// Room is the room to enter on connecting; default "lobby".
	Room string
	// Sender is the display name put into every message sent, and the
	// name the client goes by in presence (a token's subject wins).
	Sender string
	// PresenceEvents asks for a PresenceChange event when a user's first
	// connection joins one of the client's rooms, or its last one leaves.
	PresenceEvents bool
	// Header is added to the upgrade request (e.g. Origin, Authorization).
	Header http.Header
	// Backoff spaces reconnect attempts.
	Backoff Backoff
	// MaxAttempts is how many reconnect attempts in a row may fail before
	// the client gives up (and ends with a Closed state carrying the error);
	// 0 means never.
	MaxAttempts int
	// DialTimeout bounds one connection attempt; default 10s.
	DialTimeout time.Duration
	// ReadLimit is the largest frame accepted from the server; default 1 MiB.
	ReadLimit int64
	// EventBuffer is the capacity of the Events channel; default 256.
	EventBuffer int
	// Logger gets one line per connection change; default: none.
	Logger *slog.Logger
}

// Client is a connection to a scalechat server that reconnects by itself.
// Its methods are safe for concurrent use.
//
// Read Events from a goroutine other than the one calling Send, Join or
// Leave: those wait while the client reconnects, and reconnecting needs the
// replayed messages to be read.
type Client struct {
	cfg     Config
	backoff Backoff
	http    *http.Client
	events  chan Event
	nextID  atomic.Uint64

	ctx    context.Context // the client's lifetime: cancelled by Close after the close handshake
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when run has returned
	once   sync.Once

	mu       sync.Mutex
	stopping bool
	live     *websocket.Conn // the connection in use, ready or not
	ready    *websocket.Conn // live once rooms are joined again and replayed; else nil
	readyCh  chan struct{}   // closed when ready is set
	gen      uint64          // counts connections
	rooms    map[string]*roomState
	pending  map[pendingKey]*pending
	flushed  chan struct{} // closed when pending empties
	err      error         // why run ended
	replayed bool          // every room of this connection is replayed
}

type roomState struct {
	want      bool   // the client wants to be in the room (rejoined on reconnect)
	seen      bool   // lastSeq is known
	lastSeq   uint64 // greatest seq received (or skipped on purpose)
	joinedSeq uint64 // seq of the last joined frame
	epoch     string // the stream lastSeq belongs to, as the last joined frame named it
	replay    int    // replayed messages still to come after joined
	awaiting  bool   // rejoined on this connection, replay not complete
}

type pendingKey struct {
	room string
	id   uint64
}

type pending struct {
	frame []byte
	gen   uint64 // connection it was last written on
	tries int
}

// Dial connects to cfg.URL and the room cfg.Room and returns a client that
// keeps the connection up until Close. ctx bounds this first connection
// only; when it fails, Dial returns the error and no client.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Room == "" {
		cfg.Room = "lobby"
	}
	if !protocol.ValidRoomString(cfg.Room) {
		return nil, fmt.Errorf("room %q: %s", cfg.Room, protocol.RoomRule)
	}
	if len(cfg.Sender) > 64 {
		return nil, errors.New("sender names are at most 64 bytes")
	}
	if _, err := RoomURL(cfg.URL, cfg.Room, 0, false, ""); err != nil {
		return nil, err
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.ReadLimit <= 0 {
		cfg.ReadLimit = 1 << 20
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		cfg:     cfg,
		backoff: cfg.Backoff.withDefaults(),
		http: &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: cfg.DialTimeout}).DialContext,
			ResponseHeaderTimeout: cfg.DialTimeout,
		}},
		events:  make(chan Event, cfg.EventBuffer),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		readyCh: make(chan struct{}),
		rooms:   map[string]*roomState{cfg.Room: {want: true}},
		pending: map[pendingKey]*pending{},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// The connection must outlive ctx: dial under the client's own context,
	// cut short by ctx.
	dctx, cancel := context.WithTimeout(c.ctx, cfg.DialTimeout)
	stop := context.AfterFunc(ctx, cancel)
	conn, err := c.dial(dctx)
	stop()
	cancel()
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.live = conn
	go c.run(conn)
	return c, nil
}

// RoomURL returns the WebSocket URL of room under base (see Config.URL),
// with ?since= when hasSince, and ?epoch= (the stream since belongs to, as
// the joined frame named it) when epoch is not empty.
func RoomURL(base, room string, since uint64, hasSince bool, epoch string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", base, err)
	}
	switch u.Scheme {
	case "ws", "wss":
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("server URL %q: want a ws:// or wss:// URL", base)
	}
	if u.Host == "" {
		return "", fmt.Errorf("server URL %q has no host", base)
	}
	p := strings.TrimSuffix(u.Path, "/")
	if p == "" {
		p = "/ws"
	}
	u.Path, u.RawPath = p+"/"+room, ""
	q := u.Query()
	q.Del("since")
	q.Del("epoch")
	if hasSince {
		q.Set("since", strconv.FormatUint(since, 10))
		if epoch != "" {
			q.Set("epoch", epoch)
		}
	}
	u.RawQuery = q.Encode()
	u.Fragment = ""
	return u.String(), nil
}

// Events delivers what the client receives and goes through, in order. It
// is closed after the last event, a *State with State Closed. Nobody reading
// it eventually stops the client reading from the server.
func (c *Client) Events() <-chan Event { return c.events }

// Done is closed when the client has stopped: after Close, or once it gave
// up reconnecting.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client stopped: nil after Close, the last connection
// error when it gave up reconnecting.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Rooms returns the rooms the client is in (or will be, once reconnected).
func (c *Client) Rooms() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rs []string
	for name, r := range c.rooms {
		if r.want {
			rs = append(rs, name)
		}
	}
	slices.Sort(rs)
	return rs
}

// LastSeq returns the greatest seq received in room, and whether there is one.
func (c *Client) LastSeq(room string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rooms[room]
	if r == nil || !r.seen {
		return 0, false
	}
	return r.lastSeq, true
}

// Send posts text to the client's room (Config.Room) and returns its
// message_id. See SendTo.
func (c *Client) Send(ctx context.Context, text string) (uint64, error) {
	return c.SendTo(ctx, c.cfg.Room, text)
}

// SendTo posts text to room, a room the client is in, and returns the
// message's message_id. While the client reconnects it waits for the new
// connection (or the end of ctx). Once SendTo has returned without error,
// the message is the client's to deliver: when the connection breaks before
// its echo, it is written again after the reconnect (see the package
// documentation), and Flush waits for its echo.
func (c *Client) SendTo(ctx context.Context, room, text string) (uint64, error) {
	type out struct {
		MessageID uint64 `json:"message_id"`
		Text      string `json:"text"`
		Sender    string `json:"sender,omitempty"`
		SentAt    string `json:"sent_at"`
		Room      string `json:"room"`
	}
	key := pendingKey{room: room}
	err := c.whenReady(ctx, func() ([]byte, error) {
		if r := c.rooms[room]; r == nil || !r.want {
			return nil, fmt.Errorf("send to %s: %w", room, ErrNotJoined)
		}
		id := c.nextID.Add(1)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // "<" stays one byte of the server's size limit
		if err := enc.Encode(out{MessageID: id, Text: text, Sender: c.cfg.Sender, SentAt: time.Now().UTC().Format(time.RFC3339Nano), Room: room}); err != nil {
			return nil, err
		}
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		// Registered before writing: the echo may come back before Write returns.
		key.id = id
		c.pending[key] = &pending{frame: b, gen: c.gen, tries: 1}
		return b, nil
	})
	var we *writeError
	switch {
	case err == nil:
		return key.id, nil
	case errors.As(err, &we) && !errors.Is(err, ErrClosed):
		return key.id, nil // the connection broke: written again after the reconnect
	}
	if key.id != 0 {
		c.mu.Lock()
		c.removePending(key)
		c.mu.Unlock()
	}
	return 0, err
}

// Join enters room over the same connection, replaying from where the
// client left it when it was in it before (since = its last seq). A Joined
// event confirms it; an Error event refuses it.
func (c *Client) Join(ctx context.Context, room string) error {
	if !protocol.ValidRoomString(room) {
		return fmt.Errorf("join %q: %s", room, protocol.RoomRule)
	}
	return c.control(ctx, func() ([]byte, error) {
		r := c.room(room)
		if r.want {
			return nil, fmt.Errorf("join %s: %w", room, ErrAlreadyJoined)
		}
		r.want = true
		return joinFrame(room, r), nil
	})
}

// Leave leaves room; a Left event confirms it.
func (c *Client) Leave(ctx context.Context, room string) error {
	return c.control(ctx, func() ([]byte, error) {
		r := c.rooms[room]
		if r == nil || !r.want {
			return nil, fmt.Errorf("leave %s: %w", room, ErrNotJoined)
		}
		r.want = false
		return fmt.Appendf(nil, `{"type":"leave","room":%q}`, room), nil
	})
}

// Presence asks who is in room; a Presence event answers.
func (c *Client) Presence(ctx context.Context, room string) error {
	return c.control(ctx, func() ([]byte, error) {
		if r := c.rooms[room]; r == nil || !r.want {
			return nil, fmt.Errorf("presence of %s: %w", room, ErrNotJoined)
		}
		return fmt.Appendf(nil, `{"type":"presence","room":%q}`, room), nil
	})
}

// control sends a control frame. A connection that breaks while writing it
// is no error: the reconnect brings the rooms to the state asked for.
func (c *Client) control(ctx context.Context, prepare func() ([]byte, error)) error {
	err := c.whenReady(ctx, prepare)
	var we *writeError
	if errors.As(err, &we) && !errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// Flush waits until the server has echoed (or refused) every message sent
// so far, or ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	for {
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.mu.Unlock()
			return nil
		}
		if c.flushed == nil {
			c.flushed = make(chan struct{})
		}
		ch := c.flushed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("messages not yet confirmed by the server: %w", ctx.Err())
		case <-c.done:
			return ErrClosed
		}
	}
}

// Pending counts the messages sent but not yet echoed or refused.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Close closes the connection with code 1000, waits briefly for the
// server's close frame (coder/websocket gives the write and the wait 5 s
// each; a live server answers at once), and stops the client. Events is closed
// once the client has stopped. Closing a closed client returns nil.
func (c *Client) Close() error {
	var err error
	c.once.Do(func() {
		c.mu.Lock()
		c.stopping = true
		conn := c.live
		c.mu.Unlock()
		close(c.stop)
		if conn != nil {
			err = conn.Close(websocket.StatusNormalClosure, "")
			if err != nil && websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				err = nil
			}
		}
		c.cancel() // aborts a dial or a backoff in progress
		<-c.done
		c.http.CloseIdleConnections()
	})
	if err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// writeError is a write on a connection that broke.
type writeError struct{ err error }

func (e *writeError) Error() string { return "write: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// whenReady waits for a ready connection, calls prepare under the lock and
// writes what it returned. The write is bounded by DialTimeout and not by
// ctx: a write cut off halfway would break the connection for every room.
func (c *Client) whenReady(ctx context.Context, prepare func() ([]byte, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		if c.stopping || c.err != nil {
			c.mu.Unlock()
			return ErrClosed
		}
		if conn := c.ready; conn != nil {
			f, err := prepare()
			c.mu.Unlock()
			if err != nil {
				return err
			}
			if err := c.write(conn, f); err != nil {
				if c.isStopping() {
					return &writeError{ErrClosed}
				}
				return &writeError{err}
			}
			return nil
		}
		ch := c.readyCh
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.stop:
			return ErrClosed
		case <-c.done:
			return ErrClosed
		}
	}
}

func (c *Client) write(conn *websocket.Conn, f []byte) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, f)
}

func (c *Client) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

func (c *Client) room(name string) *roomState {
	r := c.rooms[name]
	if r == nil {
		r = &roomState{}
		c.rooms[name] = r
	}
	return r
}

func joinFrame(room string, r *roomState) []byte {
	if r.seen {
		if r.epoch != "" {
			return fmt.Appendf(nil, `{"type":"join","room":%q,"since":%d,"epoch":%q}`, room, r.lastSeq, r.epoch)
		}
		return fmt.Appendf(nil, `{"type":"join","room":%q,"since":%d}`, room, r.lastSeq)
	}
	return fmt.Appendf(nil, `{"type":"join","room":%q}`, room)
}

// removePending forgets a message; c.mu is held.
func (c *Client) removePending(k pendingKey) bool {
	if _, ok := c.pending[k]; !ok {
		return false
	}
	delete(c.pending, k)
	if len(c.pending) == 0 && c.flushed != nil {
		close(c.flushed)
		c.flushed = nil
	}
	return true
}

// emit delivers ev; once the client is closing, only if there is room.
func (c *Client) emit(ev Event) {
	select {
	case c.events <- ev:
		return
	default:
	}
	select {
	case c.events <- ev:
	case <-c.stop:
	}
}

// urlRoomLocked picks the URL room of the next connection: the configured
// room while the client is in it, else another room it is in. c.mu is held.
func (c *Client) urlRoomLocked() string {
	room := c.cfg.Room
	if r := c.rooms[room]; r == nil || !r.want {
		var others []string
		for name, r := range c.rooms {
			if r.want {
				others = append(others, name)
			}
		}
		if len(others) > 0 {
			slices.Sort(others)
			room = others[0]
		}
	}
	return room
}
