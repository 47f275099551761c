//go:build linux

package server

import (
	"net/netip"
	"time"
	"unicode/utf8"

	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/ws"
)

type connState uint8

const (
	stateOpen    connState = iota
	stateClosing           // close frame queued: no more data in or out
	stateClosed            // fd closed
)

// membership is one room a connection is in.
type membership struct {
	room  *room.Room
	local *localRoom
	idx   int // index in local.members
}

// conn is one WebSocket connection. Only its loop's goroutine touches it.
// An idle connection holds no buffer: pending, rd's fragments and out are
// nil.
type conn struct {
	id   uint64 // its number on this node: see Server.connID
	fd   int
	loop *loop

	pending []byte    // a frame cut short by the last read
	rd      ws.Reader // holds the fragments of a message in progress

	out      [][]byte // frames to write, shared with other members and the history
	outHead  int      // out[:outHead] are written
	outOff   int      // bytes of out[outHead] written
	outBytes int      // bytes queued, not yet written

	rooms   []membership
	urlRoom *room.Room // where messages without "room" go; nil once left
	waiting []string   // rooms being loaded from the broker before this connection can join them

	tokens, abuse float64 // rate limiter buckets
	lastRefill    int64   // unix nanoseconds

	lastRead     int64 // unix nanoseconds, coarse
	deadline     int64 // while closing: give up waiting for the peer
	slot         int   // timing wheel slot, -1 when not scheduled
	opened       int64 // unix nanoseconds
	partialSince int64 // a frame or message begun and not complete since then; 0: none
	nextAt       int64 // when the wheel will look at this connection next

	// From the token, when the server authenticates.
	sender  string   // who the connection is, verified (the token's subject, the connect hook's user): the forced sender of its chat messages and the user of its hook calls; "" when nobody verified it
	user    string   // who the connection is in presence: sender, or the URL's unverified name
	allowed []string // rooms the token allows, when limitRooms
	expires int64    // unix nanoseconds; 0: never

	ip netip.Addr // counted by the address limiter when ipCounted

	// Small fields together, so that the struct has no padding between them.
	closeCode   ws.StatusCode
	state       connState
	pinged      bool // a ping is out since lastRead
	dirty       bool // in loop.dirty
	wantWrite   bool // registered for writability
	closeQueued bool // our close frame is in out
	peerClosed  bool // the peer's close frame arrived
	failed      bool // the input is no longer framed: close after our close frame
	echo        bool // /echo: messages come back, no rooms
	gotFrame    bool // the client has sent a frame
	limitRooms  bool // the token limits the rooms
	presence    bool // sends presence_join and presence_leave frames
	deflate     bool // permessage-deflate was negotiated
	control     bool // the client speaks protocol.Subprotocol: it gets control frames
	ipCounted   bool
}

// nextDeadline returns when the wheel must next look at an open
// connection: its ping or silence deadline, or an earlier one.
func (c *conn) nextDeadline(cfg *Config) int64 {
	at := c.lastRead + int64(cfg.PingInterval)
	if c.pinged {
		at = c.lastRead + int64(cfg.PongTimeout)
	}
	if c.partialSince != 0 && cfg.FrameTimeout > 0 {
		at = min(at, c.partialSince+int64(cfg.FrameTimeout))
	}
	if !c.gotFrame && cfg.FirstFrameTimeout > 0 {
		at = min(at, c.opened+int64(cfg.FirstFrameTimeout))
	}
	if c.expires != 0 {
		at = min(at, c.expires)
	}
	return at
}

// process cuts data into frames and handles them, and returns how many
// bytes it consumed; the rest is an incomplete frame.
func (c *conn) process(data []byte) int {
	if c.failed {
		return len(data) // the stream is no longer framed: ignore the rest
	}
	limit := c.messageLimit()
	off := 0
	for off < len(data) && c.state != stateClosed {
		f, n, _, err := c.rd.Next(data[off:], ws.ServerSide, limit)
		if err != nil {
			c.failInput(err)
			return len(data)
		}
		if n == 0 {
			break
		}
		off += n
		c.gotFrame = true
		if f.OpCode != 0 {
			c.onFrame(f)
		}
	}
	return off
}

// frameOf returns the frame of a room message to send c: the message as
// the room holds it (its JSON behind the header wsFraming put there), or,
// when c negotiated permessage-deflate, its compressed frame, made once per
// message for every such member. m is a pointer: a loop calls this once per
// member of a room, and a Message is six words to copy each time.
func (c *conn) frameOf(m *room.Message) []byte {
	if c.deflate {
		return m.Compressed(deflateMessage)
	}
	return m.Framed()
}

// deflateMessage returns m's compressed frame, or its plain one when
// compression does not make it smaller.
func deflateMessage(m room.Message) []byte {
	if z := ws.DeflatedFrame(ws.OpText, m.JSON()); len(z) < len(m.Framed()) {
		return z
	}
	return m.Framed()
}

// wsFraming is the room.Framing of WebSocket connections: the header of an
// unfragmented text frame, written once per message in front of its JSON
// when the room makes it, so that each member's write sends the shared
// bytes as they are (one iovec, no copy, no header built per member).
type wsFraming struct{}

func (wsFraming) HeadSize(n int) int { return ws.HeaderSize(n, false) }

func (wsFraming) AppendHead(dst []byte, n int) []byte {
	return ws.AppendHeader(dst, ws.Header{Fin: true, OpCode: ws.OpText, Length: int64(n)})
}

// onFrame handles a whole message or a control frame.
func (c *conn) onFrame(f ws.Frame) {
	if f.Compressed && !c.inflate(&f) {
		return
	}
	switch f.OpCode {
	case ws.OpText, ws.OpBinary:
		if f.OpCode == ws.OpBinary && !c.echo && !c.binaryAsText(f.Payload) {
			return
		}
		c.onMessage(f.OpCode, f.Payload)
	case ws.OpClose:
		// The peer's close ends its side of the handshake whatever it holds:
		// once ours is out, TCP closes (RFC 6455 section 7.1.1).
		c.peerClosed = true
		code, _, err := ws.ParseClosePayload(f.Payload)
		reply, reason := code, ""
		switch {
		case err != nil:
			c.loop.stats.dropped[DropInvalid].Add(1)
			reply, reason = ws.CloseProtocolError, err.Error()
		case code == ws.CloseNoStatus:
			reply = ws.CloseNormal
		}
		if c.state == stateOpen {
			c.closeWith(reply, reason)
			return
		}
		if c.state == stateClosing && c.outBytes == 0 {
			c.loop.closeFD(c)
		}
	case ws.OpPing:
		if c.state == stateOpen {
			c.enqueueOwn(ws.AppendFrame(make([]byte, 0, 2+len(f.Payload)), ws.OpPong, true, f.Payload))
		}
	case ws.OpPong:
		// lastRead, set by every read, is all a pong is for.
	}
}

// binaryAsText reports whether a binary chat message may be read as the
// text it holds. The original five-field server decodes every message
// whatever its opcode, and clients written for it (Tsung sends binary
// frames by default) rely on that, so a five-field client's binary message
// is read as text, once its bytes are checked to be the UTF-8 a text frame
// would have been checked for (what it broadcasts goes out as text). A
// client of protocol.Subprotocol is held to text frames: 1003.
func (c *conn) binaryAsText(p []byte) bool {
	switch {
	case c.control:
		c.loop.stats.dropped[DropInvalid].Add(1)
		c.closeWith(ws.CloseUnsupportedData, "binary frames are not supported")
		return false
	case !utf8.Valid(p):
		c.loop.stats.dropped[DropInvalid].Add(1)
		c.closeWith(ws.CloseInvalidPayload, "a binary message read as text must be UTF-8")
		return false
	}
	return true
}

// inflate decompresses a compressed message in place of its payload, with
// the message size limit on what comes out, and checks its text; it fails
// the connection and reports false when it cannot.
func (c *conn) inflate(f *ws.Frame) bool {
	l := c.loop
	var err error
	if l.inflated, err = l.inflater.Inflate(l.inflated[:0], *f, c.messageLimit()); err != nil {
		c.failInput(err)
		return false
	}
	f.Payload, f.Compressed = l.inflated, false
	return true
}

// failInput fails the connection after input the reader or the inflater
// refused, counting it by its close code.
func (c *conn) failInput(err error) {
	code := ws.CodeOf(err)
	if code == ws.CloseMessageTooBig {
		c.loop.stats.dropped[DropTooBig].Add(1)
	} else {
		c.loop.stats.dropped[DropInvalid].Add(1)
	}
	c.fail(code, err.Error())
}

// messageLimit is the largest message c may send: the chat's, or the echo
// endpoint's own.
func (c *conn) messageLimit() int64 {
	if c.echo {
		return int64(c.loop.srv.cfg.EchoMaxMessage)
	}
	return int64(c.loop.srv.cfg.MaxMessageSize)
}

// onMessage handles one complete message: text, or binary on /echo or
// from a five-field client (see binaryAsText).
func (c *conn) onMessage(op ws.OpCode, data []byte) {
	if c.state != stateOpen {
		return
	}
	l := c.loop
	l.stats.messagesIn.Add(1)
	if c.echo {
		if c.deflate {
			c.enqueueOwn(ws.DeflatedFrame(op, data))
			return
		}
		c.enqueueOwn(ws.AppendFrame(make([]byte, 0, ws.HeaderSize(len(data), false)+len(data)), op, true, data))
		return
	}
	f := &l.frame
	f.SenderOverride = c.sender
	if err := protocol.ParseFrame(data, f); err != nil {
		l.stats.dropped[DropInvalid].Add(1)
		if pe, ok := err.(*protocol.Error); ok {
			c.sendError(pe.Code, pe.Message, f)
		} else {
			c.sendError("invalid_message", err.Error(), f)
		}
		return
	}
	switch f.Kind {
	case protocol.KindMessage:
		c.onChat(f, data)
	case protocol.KindJoin:
		c.onJoin(f)
	case protocol.KindLeave:
		c.onLeave(f)
	case protocol.KindPresence:
		i := c.membershipOf(f.Room)
		if i < 0 {
			c.sendError("not_joined", "not a member of this room", f)
			return
		}
		if c.rooms[i].room.Options().NoPresence {
			c.sendError(codePresenceOff, "presence is off in this room's namespace", f)
			return
		}
		members, users, anonymous := c.rooms[i].room.Presence()
		c.enqueueControl(protocol.AppendPresenceUsers(l.enc[:0], c.rooms[i].room.Name(), members, users, anonymous))
	}
}

func (c *conn) onChat(f *protocol.Frame, data []byte) {
	l := c.loop
	if !c.allow(l.nowNano) {
		l.stats.dropped[DropRateLimit].Add(1)
		if c.abuse < 1 {
			c.closeWith(ws.ClosePolicyViolation, "rate limit exceeded repeatedly")
			return
		}
		c.abuse--
		c.sendError("rate_limited", l.rateMessage, f)
		return
	}
	r := c.urlRoom
	if f.Room != nil {
		r = nil
		if i := c.membershipOf(f.Room); i >= 0 {
			r = c.rooms[i].room
		}
	}
	if r == nil {
		if !c.hold(f, data) {
			c.sendError("not_joined", "not a member of this room", f)
		}
		return
	}
	if l.lag.behind {
		l.stats.dropped[DropOverloaded].Add(1)
		c.sendError(protocol.CodeUnavailable, behindMessage, f)
		return
	}
	c.publishIn(f, data, r)
}

// behindMessage is what a sender is told when its message was read while
// the loop was behind (Config.MaxLoopLag): nothing of it was sent.
const behindMessage = "the server is over capacity: messages waited too long to be read, and new ones are refused until it catches up; send it again later"

// publishIn publishes a chat message in r, a room c is a member of, as the
// room's namespace and hooks allow.
func (c *conn) publishIn(f *protocol.Frame, data []byte, r *room.Room) {
	l := c.loop
	if r.Options().BackendOnly {
		l.stats.dropped[DropBackendOnly].Add(1)
		c.sendError(codeBackendOnly, "only the backend publishes in this room's namespace", f)
		return
	}
	if r.Options().PublishHook {
		c.publishHooked(f, data, r)
		return
	}
	c.publish(f, data, r)
}

// publish orders a chat message in r: f is data parsed, with c's sender.
func (c *conn) publish(f *protocol.Frame, data []byte, r *room.Room) {
	l := c.loop
	var seqAt int
	l.enc, seqAt = protocol.AppendChatDraft(l.enc[:0], r.Name(), time.Now(), f, data)
	if _, err := r.Publish(l.enc, seqAt, l.nowNano, l.id, c.publishID()); err != nil {
		l.stats.dropped[DropUnavailable].Add(1)
		c.sendError(protocol.CodeUnavailable, err.Error(), f)
	}
}

// allow takes a token from the rate limiter, refilling both buckets first.
func (c *conn) allow(now int64) bool {
	cfg := &c.loop.srv.cfg
	if c.lastRefill != 0 {
		add := float64(now-c.lastRefill) / 1e9 * cfg.RateLimit
		c.tokens = min(c.tokens+add, float64(cfg.RateBurst))
		c.abuse = min(c.abuse+add, float64(cfg.RateAbuse))
	}
	c.lastRefill = now
	if c.tokens >= 1 {
		c.tokens--
		return true
	}
	return false
}

// sendError refuses a frame: with an error frame to a client that speaks
// protocol.Subprotocol, else by closing the connection with the code that
// says why, since a five-field client would take an error frame for a chat
// message.
func (c *conn) sendError(code, message string, f *protocol.Frame) {
	if c.control {
		c.enqueueOwnJSON(protocol.AppendError(c.loop.enc[:0], code, message, f))
		return
	}
	c.closeWith(refusalCode(code), message)
}

// refusalCode is the close code of a refusal for clients without control
// frames: 1007 for a frame the protocol cannot read, 1013 for a server that
// holds as many rooms as it may, 1008 for what the rules forbid.
func refusalCode(code string) ws.StatusCode {
	switch code {
	case protocol.CodeInvalidJSON, protocol.CodeInvalidMessage, protocol.CodeUnknownType, protocol.CodeInvalidRoom:
		return ws.CloseInvalidPayload
	case "rooms_full", protocol.CodeUnavailable:
		return ws.CloseTryAgainLater
	}
	return ws.ClosePolicyViolation
}

// enqueueControl queues a control frame (joined, left, presence,
// history_gap) for a client that asked for them.
func (c *conn) enqueueControl(payload []byte) {
	if !c.control {
		c.loop.enc = payload[:0]
		return
	}
	c.enqueueOwnJSON(payload)
}

// enqueueOwnJSON queues a frame holding a copy of payload for this
// connection alone.
func (c *conn) enqueueOwnJSON(payload []byte) {
	c.loop.enc = payload[:0]
	c.enqueueOwn(ws.TextFrame(payload))
}

// enqueueOwn queues a frame meant for this connection alone (answers and
// control frames): it is never refused for queue size.
func (c *conn) enqueueOwn(frame []byte) {
	if c.state != stateOpen {
		return
	}
	c.push(frame)
}

// enqueueShared queues a broadcast frame. Frames pile up freely while the
// loop delivers (it writes them all at once afterwards), but a connection
// whose socket is already full and whose queue would exceed MaxQueue is a
// slow consumer: it is closed with 1013 once the loop has finished
// delivering (closing it now would reorder the members being iterated).
func (c *conn) enqueueShared(frame []byte) bool {
	if c.state != stateOpen {
		return false
	}
	if c.wantWrite && c.outBytes+len(frame) > c.queueLimit() {
		c.state = stateClosing
		c.loop.slow = append(c.loop.slow, c)
		return false
	}
	c.push(frame)
	return true
}

// queueLimit is how many bytes may wait for c's socket: MaxQueue, or on
// /echo room for two of the largest messages, echoed back to a peer that
// sends them.
func (c *conn) queueLimit() int {
	if c.echo {
		return max(c.loop.srv.cfg.MaxQueue, 2*int(c.messageLimit())+ws.MaxHeaderSize)
	}
	return c.loop.srv.cfg.MaxQueue
}

// closeSlow closes a slow consumer: what has not started to go out is
// dropped, and the close frame 1013 follows what has.
func (c *conn) closeSlow() {
	c.loop.stats.dropped[DropSlowConsumer].Add(1)
	c.state = stateClosing
	c.closeCode = ws.CloseTryAgainLater
	c.dropUnsent()
	c.finishClosing("slow consumer")
}

func (c *conn) push(frame []byte) {
	c.out = append(c.out, frame)
	c.outBytes += len(frame)
	if !c.dirty {
		c.dirty = true
		c.loop.dirty = append(c.loop.dirty, c)
	}
}

// closeWith starts the closing handshake: it leaves every room, queues a
// close frame after what is already queued, and waits (up to CloseTimeout)
// for the peer's close frame.
func (c *conn) closeWith(code ws.StatusCode, reason string) {
	if c.state != stateOpen {
		return
	}
	c.state = stateClosing
	c.closeCode = code
	c.finishClosing(reason)
}

// fail closes a connection whose byte stream can no longer be cut into
// frames (a malformed header, a frame too big to read): the close frame
// goes out, then the TCP connection closes without waiting for the peer
// (RFC 6455 section 7.1.7).
func (c *conn) fail(code ws.StatusCode, reason string) {
	if c.state != stateOpen {
		c.failed = true
		return
	}
	c.closeWith(code, reason)
	c.failed = true
}

// finishClosing queues the close frame of a connection already marked
// closing.
func (c *conn) finishClosing(reason string) {
	l := c.loop
	l.hookGone(c)
	c.leaveAll()
	c.rd.Reset()
	c.push(ws.AppendCloseFrame(nil, c.closeCode, reason))
	c.closeQueued = true
	c.deadline = l.nowNano + int64(l.closeTimeout)
	l.schedule(c, c.deadline)
}

// dropUnsent discards queued frames that have not started to go out, for a
// slow consumer that will get nothing but its close frame.
func (c *conn) dropUnsent() {
	keep := c.outHead
	if c.outOff > 0 {
		keep++
	}
	for i := keep; i < len(c.out); i++ {
		c.outBytes -= len(c.out[i])
		c.out[i] = nil
	}
	c.out = c.out[:keep]
}
