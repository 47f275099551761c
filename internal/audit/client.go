package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	scclient "github.com/scalechat/scalechat/client"
	"github.com/scalechat/scalechat/internal/protocol"
)

// stream is what one client saw of one stream (epoch) of its room.
type stream struct {
	first uint64         // the seq of the first joined frame in this stream: later seqs are the client's to get
	got   map[uint64]int // seq -> times received
	gaps  [][2]uint64    // ranges [from, to] the server said it no longer holds (history_gap)
}

// client is one audited chat client. Its connection loop, its sender and
// the fault injector share it under mu.
type client struct {
	a     *auditor
	id    int
	name  string // its "sender"
	room  string
	phase time.Duration

	mu           sync.Mutex
	conn         *websocket.Conn // nil while disconnected
	connected    bool            // in its room on conn
	epoch        string
	lastSeq      uint64 // highest seq received in the current stream: the resume point
	joinedSeq    uint64 // the seq of the last joined frame
	streams      map[string]*stream
	order        []string    // epochs in the order met
	reordered    []time.Time // when a seq came lower than the previous one on the same connection
	dups         []time.Time // when a seq came again
	foreign      int64       // chat frames of another room
	joins        int         // joined frames
	cuts         []time.Time
	rejoined     []time.Time          // rejoined[i]: when the client was back after cuts[i]
	ended        []time.Time          // when each connection ended, whatever ended it
	prevEpoch    string               // the stream before the current one
	sent         map[uint64]time.Time // counter -> when it was written
	counter      uint64
	sendErrs     int64
	sessions     int             // connection attempts
	legacy       legacyState     // the five-field protocol's bookkeeping
	refused      map[uint64]bool // counters of messages the server refused with an error frame
	firstRefusal string
}

func newClient(a *auditor, id int, room string, phase time.Duration) *client {
	return &client{a: a, id: id, name: "a" + strconv.Itoa(id), room: room, phase: phase,
		streams: map[string]*stream{}, sent: map[uint64]time.Time{}, refused: map[uint64]bool{}}
}

func (c *client) hasJoined() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.joins > 0
}

// run connects, reads until the connection ends, and reconnects with the
// resume point until ctx ends.
func (c *client) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := c.session(ctx); err != nil && ctx.Err() == nil {
			c.a.noteError(fmt.Errorf("%s: %w", c.name, err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.a.cfg.Reconnect):
		}
	}
}

// session is one connection: dial with since and epoch, then read.
func (c *client) session(ctx context.Context) error {
	if c.a.cfg.Protocol == ProtocolSocketIO {
		return c.socketioSession(ctx)
	}
	c.mu.Lock()
	since, has, epoch := c.lastSeq, c.joins > 0, c.epoch
	// Start on node id mod n, move to the next one on every reconnect, as
	// a client behind a load balancer would land on another node.
	urls := c.a.cfg.URLs
	base := urls[(c.id+c.sessions)%len(urls)]
	c.sessions++
	c.mu.Unlock()
	legacy := c.a.cfg.Protocol == ProtocolLegacy
	opts := &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}}
	if legacy {
		has, opts = false, nil // no resume: the room of the URL, chat frames only
	}
	u, err := scclient.RoomURL(base, c.room, since, has, epoch)
	if err != nil {
		return err
	}
	if c.a.cfg.Names {
		u = withName(u, c.name)
	}
	conn, err := dial(ctx, u, opts)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.conn = conn
	if legacy {
		c.legacyJoined()
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.conn, c.connected = nil, false
		c.ended = append(c.ended, time.Now())
		if legacy && ctx.Err() == nil { // the end of the run is not an absence
			c.legacy.spans[len(c.legacy.spans)-1].end = time.Now()
		}
		c.mu.Unlock()
	}()
	// The close handshake when the run ends, a cut (CloseNow) otherwise.
	stop := context.AfterFunc(ctx, func() { conn.Close(websocket.StatusNormalClosure, "audit over") })
	defer stop()
	var prev uint64
	for {
		_, data, err := conn.Read(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		frame := c.frame
		if legacy {
			frame = c.legacyFrame
		}
		if err := frame(data, &prev); err != nil {
			conn.Close(websocket.StatusPolicyViolation, err.Error())
			return err
		}
	}
}

// inFrame holds the fields of a server frame the audit reads.
type inFrame struct {
	Type     string `json:"type"`
	Room     string `json:"room"`
	Epoch    string `json:"epoch"`
	Seq      uint64 `json:"seq"`
	Since    uint64 `json:"since"`
	FirstSeq uint64 `json:"first_seq"`
	Reset    bool   `json:"reset"`
	Sender   string `json:"sender"`
	ID       uint64 `json:"message_id"`
	Code     string `json:"code"`
}

// frame handles one frame; prev is the last seq of this connection.
func (c *client) frame(data []byte, prev *uint64) error {
	var f inFrame
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("a frame that is not JSON: %q", data)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.Type == "error" {
		// A refusal the sender is told of: not a silent loss. The
		// connection stays open. (It names no room when the refused
		// message named none.)
		c.refused[f.ID] = true
		if c.firstRefusal == "" {
			c.firstRefusal = string(data)
		}
		return nil
	}
	if f.Room != c.room {
		if f.Type == "" {
			c.foreign++
		}
		return nil
	}
	switch f.Type {
	case "joined":
		c.joined(f)
		*prev = 0
	case "history_gap":
		s := c.streams[c.epoch]
		to := f.FirstSeq - 1
		if f.FirstSeq == 0 {
			to = c.joinedSeq // nothing held: the gap runs up to the room's seq at the join
		}
		switch {
		case f.Reset:
			// The room started anew: the server says the rest of the
			// client's old stream is gone.
			if old := c.streams[c.prevEpoch]; old != nil && c.prevEpoch != c.epoch {
				old.gaps = append(old.gaps, [2]uint64{f.Since + 1, math.MaxUint64})
			}
			if to >= 1 { // and the new stream's messages before first_seq are gone
				s.gaps = append(s.gaps, [2]uint64{1, to})
			}
		case to > f.Since:
			s.gaps = append(s.gaps, [2]uint64{f.Since + 1, to})
		}
	case "":
		s := c.streams[c.epoch]
		if s == nil {
			return errors.New("a chat message before the joined frame")
		}
		now := time.Now()
		s.got[f.Seq]++
		if s.got[f.Seq] > 1 {
			c.dups = append(c.dups, now)
		}
		if f.Seq < *prev {
			c.reordered = append(c.reordered, now)
		}
		*prev = f.Seq
		c.lastSeq = max(c.lastSeq, f.Seq)
		if rest, ok := strings.CutPrefix(f.Sender, "a"); ok {
			if id, err := strconv.Atoi(rest); err == nil {
				c.mu.Unlock() // the auditor's lock is never taken inside a client's
				c.a.sawMessage(c.id, msgKey{id, f.ID}, c.room, c.epoch, f.Seq, now)
				c.mu.Lock()
			}
		}
	}
	return nil
}

// joined starts or resumes a stream.
func (c *client) joined(f inFrame) {
	c.joins++
	c.joinedSeq = f.Seq
	c.connected = true
	if n := len(c.cuts); n > len(c.rejoined) {
		c.rejoined = append(c.rejoined, time.Now())
	}
	if f.Epoch != c.epoch || c.streams[f.Epoch] == nil {
		// A new stream (first join, or the room started anew): the
		// client's messages are those after this seq.
		if c.streams[f.Epoch] == nil {
			c.streams[f.Epoch] = &stream{first: f.Seq, got: map[uint64]int{}}
			c.order = append(c.order, f.Epoch)
		}
		c.prevEpoch, c.epoch = c.epoch, f.Epoch
		c.lastSeq = f.Seq
	}
}

// send writes a message every Interval, from the client's phase on, while
// it is in its room.
func (c *client) send(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(c.phase):
	}
	t := time.NewTicker(c.a.cfg.Interval)
	defer t.Stop()
	for ctx.Err() == nil {
		c.mu.Lock()
		conn, ok := c.conn, c.connected
		var n uint64
		if ok {
			c.counter++
			n = c.counter
			c.sent[n] = time.Now()
		}
		c.mu.Unlock()
		if ok {
			msg := `{"message_id":` + strconv.FormatUint(n, 10) + `,"sender":"` + c.name + `","text":"audit"}`
			switch c.a.cfg.Protocol {
			case ProtocolSocketIO:
				msg = socketioChat(c.room, n, c.name)
			case ProtocolLegacy:
				msg = c.legacyMessage(n)
			}
			// Not cancelled when the sending ends: a write cut short by
			// its context closes the connection (coder/websocket), and
			// the client would miss the drain.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := conn.Write(wctx, websocket.MessageText, []byte(msg)); err != nil {
				c.mu.Lock()
				c.sendErrs++
				delete(c.sent, n) // not written whole: the server never saw a message
				c.mu.Unlock()
			}
			cancel()
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// cut drops the client's connection without a close frame, as a network
// failure would. It returns the cut's number.
func (c *client) cut() (int, bool) {
	c.mu.Lock()
	conn, ok := c.conn, c.connected
	if ok {
		c.cuts = append(c.cuts, time.Now())
		c.connected = false
	}
	n := len(c.cuts) - 1
	c.mu.Unlock()
	if !ok {
		return 0, false
	}
	conn.CloseNow()
	return n, true
}

// recovery is how long the client took to be back in its room after cut i.
func (c *client) recovery(i int) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.rejoined) {
		return 0, false
	}
	return c.rejoined[i].Sub(c.cuts[i]), true
}

// dial opens a client's WebSocket, waiting at most 5 s for the handshake.
func dial(ctx context.Context, u string, opts *websocket.DialOptions) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, u, opts)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	return conn, nil
}

// withName returns the room URL u with ?name= set to name (a plain
// "a<id>": no escaping needed beyond the query's).
func withName(u, name string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "name=" + url.QueryEscape(name)
}
