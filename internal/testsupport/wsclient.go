package testsupport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/scalechat/scalechat/internal/protocol"
)

// WSFrame is what a test needs of a server frame (docs/protocol.md).
type WSFrame struct {
	Type    string `json:"type"` // empty for a chat message
	Room    string `json:"room"`
	Seq     uint64 `json:"seq"`
	Text    string `json:"text"`
	Members int    `json:"members"`
	History int    `json:"history"`
	Since   uint64 `json:"since"`
	Epoch   string `json:"epoch"`
	// FirstSeq and Reset are a history_gap's.
	FirstSeq uint64 `json:"first_seq"`
	Reset    bool   `json:"reset"`
	// User is a presence event's; Users and Anonymous a presence answer's.
	User  string `json:"user"`
	Users []struct {
		User        string `json:"user"`
		Connections int    `json:"connections"`
	} `json:"users"`
	Anonymous int `json:"anonymous"`
	// Code is an error frame's.
	Code string `json:"code"`
}

// CloseError is returned by WSConn.Read when the server sent a close frame.
type CloseError struct{ Code int }

func (e *CloseError) Error() string { return fmt.Sprintf("closed by the server with %d", e.Code) }

// WSConn is a plain blocking WebSocket chat client (gobwas/ws, an
// implementation independent of the server's), with no reconnect logic of
// its own.
type WSConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// DialWS opens a WebSocket to url.
func DialWS(ctx context.Context, url string) (*WSConn, error) {
	d := gws.Dialer{Timeout: 5 * time.Second, Protocols: []string{protocol.Subprotocol}}
	conn, r, _, err := d.Dial(ctx, url)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = bufio.NewReader(conn)
	}
	return &WSConn{conn: conn, r: r}, nil
}

// Close closes the TCP connection.
func (c *WSConn) Close() error { return c.conn.Close() }

// Send posts a chat message with text into the URL room.
func (c *WSConn) Send(text string) error {
	b, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		return err
	}
	return gws.WriteFrame(c.conn, gws.MaskFrameInPlace(gws.NewTextFrame(b)))
}

// SendFrame posts a JSON frame (join, leave, presence...).
func (c *WSConn) SendFrame(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return gws.WriteFrame(c.conn, gws.MaskFrameInPlace(gws.NewTextFrame(b)))
}

// ReadType returns the next frame of type typ, skipping others.
func (c *WSConn) ReadType(typ string, timeout time.Duration) (WSFrame, error) {
	deadline := time.Now().Add(timeout)
	for {
		f, err := c.Read(time.Until(deadline))
		if err != nil || f.Type == typ {
			return f, err
		}
	}
}

// Read returns the next text frame, answering pings. A close frame from the
// server is answered and returned as a *CloseError.
func (c *WSConn) Read(timeout time.Duration) (WSFrame, error) {
	c.conn.SetReadDeadline(time.Now().Add(timeout))
	defer c.conn.SetReadDeadline(time.Time{})
	for {
		//lint:ignore SA1019 the peer is the server under test, whose frames are bounded
		f, err := gws.ReadFrame(c.r)
		if err != nil {
			return WSFrame{}, err
		}
		switch f.Header.OpCode {
		case gws.OpPing:
			pong := gws.NewPongFrame(f.Payload)
			if err := gws.WriteFrame(c.conn, gws.MaskFrameInPlace(pong)); err != nil {
				return WSFrame{}, err
			}
		case gws.OpPong:
		case gws.OpText:
			var m WSFrame
			if err := json.Unmarshal(f.Payload, &m); err != nil {
				return WSFrame{}, fmt.Errorf("frame %q: %w", f.Payload, err)
			}
			return m, nil
		case gws.OpClose:
			code := 1005
			if len(f.Payload) >= 2 {
				code = int(f.Payload[0])<<8 | int(f.Payload[1])
			}
			_ = gws.WriteFrame(c.conn, gws.MaskFrameInPlace(gws.NewCloseFrame(gws.NewCloseFrameBody(gws.StatusCode(code), ""))))
			return WSFrame{}, &CloseError{Code: code}
		default:
			return WSFrame{}, fmt.Errorf("unexpected opcode %v", f.Header.OpCode)
		}
	}
}

// Joined reads the joined frame, an optional history_gap frame and the
// replayed history that follows.
func (c *WSConn) Joined(timeout time.Duration) (joined WSFrame, gap *WSFrame, history []WSFrame, err error) {
	joined, err = c.Read(timeout)
	if err != nil {
		return joined, nil, nil, err
	}
	if joined.Type != "joined" {
		return joined, nil, nil, fmt.Errorf("want a joined frame, got %+v", joined)
	}
	for len(history) < joined.History {
		f, err := c.Read(timeout)
		if err != nil {
			return joined, gap, history, err
		}
		switch {
		case f.Type == "history_gap" && gap == nil && len(history) == 0:
			gap = &f
		case f.Type == "":
			history = append(history, f)
		default:
			return joined, gap, history, fmt.Errorf("want replayed history, got %+v", f)
		}
	}
	return joined, gap, history, nil
}

// Members joins room on a node directly and returns how many members the
// node has in it, this probe included.
func Members(ctx context.Context, n *Node, room string) (int, error) {
	c, err := DialWS(ctx, n.URL("/ws/"+room))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", n.Name, err)
	}
	defer c.Close()
	j, _, _, err := c.Joined(5 * time.Second)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", n.Name, err)
	}
	return j.Members, nil
}

// IsTimeout says whether err is a read or dial past its deadline.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
