package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/coder/websocket"
	"github.com/scalechat/scalechat/internal/protocol"
)

// The connection's life: dialing, the session that reads the server's frames,
// replay after a reconnect, and the errors a connection ends with.

// dial connects to the URL room, with since when the client has been in it.
func (c *Client) dial(ctx context.Context) (*websocket.Conn, error) {
	c.mu.Lock()
	room := c.urlRoomLocked()
	r := c.room(room)
	u, _ := RoomURL(c.cfg.URL, room, r.lastSeq, r.seen, r.epoch) // checked by Dial
	c.mu.Unlock()
	u = presenceQuery(u, c.cfg.Sender, c.cfg.PresenceEvents)
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: c.cfg.Header, Subprotocols: []string{protocol.Subprotocol}})
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

// CloseDisconnected is the close code of a connection closed through the
// server API (a backend disconnected the user or the connection): the
// client does not reconnect after it, and ends with a Closed state.
const CloseDisconnected = 4001

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
		if ce, ok := err.(*ConnError); ok && ce.Code == CloseDisconnected {
			final = err // a backend closed it on purpose: coming back would undo that
			return
		}
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

// presenceQuery adds who the client is (name, for presence; a token's
// subject wins on the server) and whether it wants presence events to a
// room URL.
func presenceQuery(u, name string, events bool) string {
	if name == "" && !events {
		return u
	}
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := p.Query()
	// A display name the server would refuse is not sent: the client
	// stays anonymous in presence rather than refused.
	if name != "" && q.Get("name") == "" && protocol.ValidUser(name) {
		q.Set("name", name)
	}
	if events {
		q.Set("presence", "1")
	}
	p.RawQuery = q.Encode()
	return p.String()
}
