package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// A Socket.IO client (ProtocolSocketIO) speaks the convention of
// docs/loadtest.md to a socket.io 4 server: an Engine.IO v4 WebSocket,
// CONNECT to the main namespace, emit("join", room) acknowledged, then
// "chat" events the server emits to the room. Socket.IO has no seq and no
// resume, so a client is checked as a five-field one (legacy.go): its
// chat payloads are that protocol's frames, a connection is a span from
// the join's acknowledgement, and what it misses while away is reported,
// not counted as a broken guarantee. Unlike the five-field protocol, the
// join is acknowledged: the audit needs no margin after it.

// socketioURL is base with the Engine.IO query; the path is /socket.io/
// when base has none.
func socketioURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("url %q is not a ws:// URL", base)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/socket.io/"
	}
	q := u.Query()
	q.Set("EIO", "4")
	q.Set("transport", "websocket")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// socketioChat is the packet that emits message counter n of sender into
// room: the five-field frame with the room, as a "chat" event.
func socketioChat(room string, n uint64, sender string) string {
	return `42["chat",{"room":` + strconv.Quote(room) + `,"message_id":` + strconv.FormatUint(n, 10) +
		`,"sender":"` + sender + `","text":"audit"}]`
}

// socketioSession is one connection of a Socket.IO client: dial, CONNECT,
// join, then read until the connection ends.
func (c *client) socketioSession(ctx context.Context) error {
	c.mu.Lock()
	urls := c.a.cfg.URLs
	base := urls[(c.id+c.sessions)%len(urls)]
	c.sessions++
	c.mu.Unlock()
	u, err := socketioURL(base)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, _, err := websocket.Dial(dctx, u, nil)
	cancel()
	if err != nil {
		return err
	}
	conn.SetReadLimit(1 << 20)
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	inRoom := false
	defer func() {
		c.mu.Lock()
		c.conn, c.connected = nil, false
		c.ended = append(c.ended, time.Now())
		if inRoom && ctx.Err() == nil { // the end of the run is not an absence
			c.legacy.spans[len(c.legacy.spans)-1].end = time.Now()
		}
		c.mu.Unlock()
	}()
	// The close handshake when the run ends, a cut (CloseNow) otherwise.
	stop := context.AfterFunc(ctx, func() { conn.Close(websocket.StatusNormalClosure, "audit over") })
	defer stop()
	write := func(s string) error {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		return conn.Write(wctx, websocket.MessageText, []byte(s))
	}
	if err := write("40"); err != nil {
		return c.socketioEnd(ctx, err)
	}
	for {
		_, data, err := conn.Read(context.Background())
		if err != nil {
			return c.socketioEnd(ctx, err)
		}
		reply, joined, err := c.socketioPacket(data)
		if err != nil {
			conn.Close(websocket.StatusPolicyViolation, "")
			return err
		}
		if joined {
			inRoom = true
		}
		if reply != "" {
			if err := write(reply); err != nil {
				return c.socketioEnd(ctx, err)
			}
		}
	}
}

// socketioEnd is the error a session ends with: none when the run is over.
func (c *client) socketioEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// socketioPacket handles one Engine.IO packet of the server: it returns
// what to answer, and whether the client is now in its room.
func (c *client) socketioPacket(data []byte) (reply string, joined bool, err error) {
	s := string(data)
	switch {
	case s == "2":
		return "3", false, nil // the server's ping
	case len(s) > 0 && (s[0] == '0' || s[0] == '3' || s[0] == '6'): // open, pong, noop
		return "", false, nil
	case s == "1":
		return "", false, errors.New("the server closed the Engine.IO session")
	case len(s) >= 2 && s[:2] == "40":
		return `421["join",` + strconv.Quote(c.room) + `]`, false, nil
	case len(s) >= 2 && s[:2] == "44":
		return "", false, fmt.Errorf("the server refused the connection: %s", s[2:])
	case s == "41":
		return "", false, errors.New("the server disconnected the socket")
	case len(s) >= 3 && s[:3] == "431":
		c.mu.Lock()
		c.legacyJoined()
		c.mu.Unlock()
		return "", true, nil
	case len(s) >= 2 && s[:2] == "42":
		return "", false, c.socketioEvent(data[2:])
	}
	return "", false, fmt.Errorf("not a Socket.IO packet: %q", data)
}

// socketioEvent handles an event: a chat payload is a five-field frame.
func (c *client) socketioEvent(data []byte) error {
	var ev []json.RawMessage
	if err := json.Unmarshal(data, &ev); err != nil || len(ev) == 0 {
		return fmt.Errorf("an event that is not a JSON array: %q", data)
	}
	var name string
	if json.Unmarshal(ev[0], &name) != nil || name != "chat" {
		return nil // another event of the app's
	}
	if len(ev) < 2 {
		return fmt.Errorf("a chat event without its message: %q", data)
	}
	c.mu.Lock()
	first := c.legacy.got == nil
	c.mu.Unlock()
	if first {
		return errors.New("a chat event before the first join was acknowledged")
	}
	return c.legacyFrame(ev[1], nil)
}
