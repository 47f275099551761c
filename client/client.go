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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
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
	// Sender is the display name put into every message sent.
	Sender string
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
		return nil, fmt.Errorf("room %q: room names are 1 to 64 characters of A-Z a-z 0-9 . _ -", cfg.Room)
	}
	if len(cfg.Sender) > 64 {
		return nil, errors.New("sender names are at most 64 bytes")
	}
	if _, err := RoomURL(cfg.URL, cfg.Room, 0, false); err != nil {
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
// with ?since= when hasSince.
func RoomURL(base, room string, since uint64, hasSince bool) (string, error) {
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
	if hasSince {
		q.Set("since", strconv.FormatUint(since, 10))
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
		return fmt.Errorf("join %q: room names are 1 to 64 characters of A-Z a-z 0-9 . _ -", room)
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

// Presence asks how many connections are in room; a Presence event answers.
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

// dial connects to the URL room, with since when the client has been in it.
func (c *Client) dial(ctx context.Context) (*websocket.Conn, error) {
	c.mu.Lock()
	room := c.urlRoomLocked()
	r := c.room(room)
	u, _ := RoomURL(c.cfg.URL, room, r.lastSeq, r.seen) // checked by Dial
	c.mu.Unlock()
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: c.cfg.Header})
	if err != nil {
		if resp != nil {
			return nil, &HandshakeError{URL: u, Status: resp.StatusCode, err: err}
		}
		return nil, fmt.Errorf("cannot connect to %s: %w", u, err)
	}
	conn.SetReadLimit(c.cfg.ReadLimit)
	return conn, nil
}

// HandshakeError is a refused WebSocket upgrade.
type HandshakeError struct {
	URL    string
	Status int // the HTTP status of the answer
	err    error
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("server refused %s: HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
}

func (e *HandshakeError) Unwrap() error { return e.err }

// ConnError says why a connection ended; it is the Err of the Disconnected
// and Reconnecting states.
type ConnError struct {
	Code   int    // the server's close code; 0 when the connection was cut without one
	Reason string // the server's close reason
	Err    error
}

func (e *ConnError) Error() string {
	switch {
	case e.Code != 0 && e.Reason != "":
		return fmt.Sprintf("server closed the connection: %d %s", e.Code, e.Reason)
	case e.Code != 0:
		return fmt.Sprintf("server closed the connection: %d", e.Code)
	case errors.Is(e.Err, io.EOF) || errors.Is(e.Err, io.ErrUnexpectedEOF):
		return "connection cut"
	}
	return "connection cut: " + e.Err.Error()
}

func (e *ConnError) Unwrap() error { return e.Err }

func connError(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return &ConnError{Code: int(ce.Code), Reason: ce.Reason, Err: err}
	}
	return &ConnError{Err: err}
}

// permanent reports whether retrying cannot help: the server rejects the
// request itself (bad room or since, origin not allowed).
func permanent(err error) bool {
	var he *HandshakeError
	return errors.As(err, &he) && (he.Status == http.StatusBadRequest || he.Status == http.StatusForbidden)
}

// run owns the connection: it reads until it breaks, then reconnects.
func (c *Client) run(conn *websocket.Conn) {
	var final error
	defer func() {
		c.mu.Lock()
		c.err = final
		c.live, c.ready = nil, nil
		c.mu.Unlock()
		// The last event is delivered even to a reader that comes late,
		// unless the buffer is full of events nobody read.
		select {
		case c.events <- &State{State: Closed, Err: final}:
		default:
		}
		close(c.events)
		close(c.done)
	}()
	attempt := 0
	for {
		wasReady, err := c.session(conn)
		err = connError(err)
		conn.CloseNow()
		if c.isStopping() {
			return
		}
		if wasReady {
			attempt = 0
		}
		c.cfg.Logger.Info("disconnected", "err", err)
		c.emit(&State{State: Disconnected, Err: err})
		for {
			attempt++
			if c.cfg.MaxAttempts > 0 && attempt > c.cfg.MaxAttempts {
				final = fmt.Errorf("gave up after %d reconnect attempts: %w", c.cfg.MaxAttempts, err)
				return
			}
			d := c.backoff.Delay(attempt, rand.Float64())
			c.emit(&State{State: Reconnecting, Attempt: attempt, Delay: d, Err: err})
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.stop:
				t.Stop()
				return
			}
			dctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
			conn, err = c.dial(dctx)
			cancel()
			if err == nil {
				break
			}
			c.cfg.Logger.Info("reconnect failed", "attempt", attempt, "err", err)
			if permanent(err) {
				final = err
				return
			}
		}
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		c.live = conn
		c.mu.Unlock()
	}
}

// session rejoins the rooms on a new connection and reads it until it
// breaks. wasReady reports whether the rooms were all replayed.
func (c *Client) session(conn *websocket.Conn) (wasReady bool, err error) {
	c.mu.Lock()
	c.gen++
	urlRoom := c.urlRoomLocked()
	var frames [][]byte
	for name, r := range c.rooms {
		r.awaiting, r.replay = false, 0
		if name == urlRoom {
			r.awaiting = true
			if !r.want { // nothing else left to be in
				frames = append(frames, fmt.Appendf(nil, `{"type":"leave","room":%q}`, name))
				r.awaiting = false
			}
			continue
		}
		if r.want {
			r.awaiting = true
			frames = append(frames, joinFrame(name, r))
		}
	}
	c.replayed = false
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		wasReady = c.replayed
		if c.ready != nil { // readyCh is closed: waiters need a new one
			c.ready = nil
			c.readyCh = make(chan struct{})
		}
		c.live = nil
		c.mu.Unlock()
	}()
	for _, f := range frames {
		if err := c.write(conn, f); err != nil {
			return false, err
		}
	}
	if err := c.checkReplayed(conn); err != nil {
		return false, err
	}
	for {
		typ, data, err := conn.Read(c.ctx)
		if err != nil {
			return false, err
		}
		if typ != websocket.MessageText {
			continue // the server sends text only
		}
		ev, err := c.handle(data)
		if err != nil {
			c.cfg.Logger.Warn("bad frame from the server", "err", err)
			continue
		}
		if ev != nil {
			c.emit(ev)
			c.confirm(ev)
		}
		if err := c.checkReplayed(conn); err != nil {
			return false, err
		}
	}
}

// checkReplayed, once every room of the connection is replayed, writes the
// messages the last connections left unconfirmed and marks the connection
// ready.
func (c *Client) checkReplayed(conn *websocket.Conn) error {
	c.mu.Lock()
	if c.replayed {
		c.mu.Unlock()
		return nil
	}
	for _, r := range c.rooms {
		if r.awaiting {
			c.mu.Unlock()
			return nil
		}
	}
	var resend []pendingKey
	var gaveUp []*Error
	for k, p := range c.pending {
		if p.gen == c.gen {
			continue
		}
		if r := c.rooms[k.room]; r == nil || !r.want || p.tries >= MaxSendAttempts {
			c.removePending(k)
			gaveUp = append(gaveUp, &Error{Code: CodeNotSent, Message: fmt.Sprintf("no confirmation from the server after %d attempts", p.tries), MessageID: k.id, Room: k.room})
			continue
		}
		p.gen = c.gen
		p.tries++
		resend = append(resend, k)
	}
	slices.SortFunc(resend, func(a, b pendingKey) int { return cmp.Compare(a.id, b.id) }) // in the order sent
	frames := make([][]byte, len(resend))
	for i, k := range resend {
		frames[i] = c.pending[k].frame
	}
	c.mu.Unlock()
	for _, e := range gaveUp {
		c.emit(e)
	}
	for _, f := range frames {
		if err := c.write(conn, f); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.replayed = true
	c.ready = conn
	close(c.readyCh)
	c.mu.Unlock()
	c.cfg.Logger.Info("connected", "resent", len(resend))
	c.emit(&State{State: Connected})
	return nil
}

// wire is every field of a server frame this client reads.
type wire struct {
	Type      string  `json:"type"`
	Room      string  `json:"room"`
	Seq       uint64  `json:"seq"`
	ServerAt  string  `json:"server_at"`
	MessageID *uint64 `json:"message_id"`
	Members   int     `json:"members"`
	History   int     `json:"history"`
	Since     uint64  `json:"since"`
	FirstSeq  uint64  `json:"first_seq"`
	Code      string  `json:"code"`
	Message   string  `json:"message"`
}

type wireChat struct {
	Room      string `json:"room"`
	Seq       uint64 `json:"seq"`
	ServerAt  string `json:"server_at"`
	MessageID uint64 `json:"message_id"`
	Text      string `json:"text"`
	Sender    string `json:"sender"`
	SentAt    string `json:"sent_at"`
}

// handle updates the client's state with one server frame and returns the
// event to deliver, nil for a duplicate or a frame of an unknown type.
func (c *Client) handle(data []byte) (Event, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("frame %.100q: %w", data, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if head.Type == "" {
		// A chat message: only the server's fields and the five of the
		// protocol are read, other fields (any type) are ignored.
		var w wireChat
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, fmt.Errorf("chat frame %.100q: %w", data, err)
		}
		return c.onMessage(&w), nil
	}
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%s frame %.100q: %w", head.Type, data, err)
	}
	switch w.Type {
	case "joined":
		r := c.room(w.Room)
		r.joinedSeq, r.replay = w.Seq, w.History
		if !r.seen {
			// A new member: what came before the replay is not for it.
			r.seen, r.lastSeq = true, w.Seq-min(uint64(max(w.History, 0)), w.Seq)
		}
		if r.replay <= 0 {
			r.awaiting = false
		}
		return &Joined{Room: w.Room, Seq: w.Seq, Members: w.Members, History: w.History}, nil
	case "history_gap":
		r := c.room(w.Room)
		reset := w.Since > r.joinedSeq
		if w.FirstSeq > 0 {
			r.lastSeq = w.FirstSeq - 1
		} else {
			r.lastSeq = r.joinedSeq
		}
		r.seen = true
		return &HistoryGap{Room: w.Room, Since: w.Since, FirstSeq: w.FirstSeq, Reset: reset}, nil
	case "left":
		if r := c.rooms[w.Room]; r != nil {
			r.awaiting, r.replay = false, 0
		}
		return &Left{Room: w.Room, Seq: w.Seq}, nil
	case "presence":
		return &Presence{Room: w.Room, Members: w.Members}, nil
	case "error":
		e := &Error{Code: w.Code, Message: w.Message, Room: w.Room}
		if w.MessageID != nil {
			e.MessageID = *w.MessageID
		}
		if r := c.rooms[w.Room]; r != nil && (w.Code == "too_many_rooms" || w.Code == "invalid_room") {
			// A refused join: the client is not in the room.
			r.want, r.awaiting = false, false
		}
		return e, nil
	}
	return nil, nil // a newer server's frame: ignored, as the protocol asks
}

// postedRoom is the room a message without a room field went to.
func (c *Client) postedRoom(room string) string {
	if room == "" {
		return c.cfg.Room
	}
	return room
}

func (c *Client) onMessage(w *wireChat) Event {
	r := c.room(w.Room)
	if r.replay > 0 {
		r.replay--
		if r.replay == 0 {
			r.awaiting = false
		}
	}
	if r.seen && w.Seq <= r.lastSeq {
		return nil // already delivered
	}
	r.seen, r.lastSeq = true, w.Seq
	m := &Message{Room: w.Room, Seq: w.Seq, MessageID: w.MessageID, Text: w.Text, Sender: w.Sender, SentAt: w.SentAt}
	if t, err := time.Parse(time.RFC3339Nano, w.ServerAt); err == nil {
		m.ServerAt = t
	}
	if w.MessageID != 0 && w.Sender == c.cfg.Sender {
		_, m.Own = c.pending[pendingKey{room: w.Room, id: w.MessageID}]
	}
	return m
}

// confirm forgets the message that ev, once delivered, confirms or refuses.
// It comes after the delivery so that Flush returns once the echoes are in
// Events.
func (c *Client) confirm(ev Event) {
	var k pendingKey
	switch e := ev.(type) {
	case *Message:
		if !e.Own {
			return
		}
		k = pendingKey{room: e.Room, id: e.MessageID}
	case *Error:
		if e.MessageID == 0 {
			return
		}
		k = pendingKey{room: c.postedRoom(e.Room), id: e.MessageID}
	default:
		return
	}
	c.mu.Lock()
	c.removePending(k)
	c.mu.Unlock()
}
