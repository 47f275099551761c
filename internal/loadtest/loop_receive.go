//go:build linux

package loadtest

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/scalechat/scalechat/internal/netpoll"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/ws"
	"golang.org/x/sys/unix"
)

// Receiving: reading sockets, cutting the server's frames (ws.Reader),
// and recording every Joined and Received row.

func (l *loop) handle(c *client, events uint32) {
	if c.state == csConnecting {
		l.onConnected(c)
		return
	}
	if events&netpoll.Writable != 0 && len(c.out) > 0 {
		if !l.flush(c) {
			return
		}
	}
	if c.lingerUs != 0 {
		if events&(netpoll.Readable|netpoll.Hangup) != 0 {
			l.drainLinger(c)
		}
		return
	}
	if events&(netpoll.Readable|netpoll.Hangup) != 0 {
		l.onReadable(c)
	}
}

// write sends b or queues what the socket does not take. It reports false
// when the connection is gone.
func (l *loop) write(c *client, b []byte) bool {
	if c.gone() {
		return false
	}
	if len(c.out) > 0 {
		c.out = append(c.out, b...)
		return true
	}
	n, err := netpoll.Write(int(c.fd), b)
	if err != nil {
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			l.lost(c, "write: "+err.Error())
			return false
		}
		n = 0
	}
	if n < len(b) {
		c.out = append(c.out, b[n:]...)
		if err := l.poller.Mod(int(c.fd), netpoll.Readable|netpoll.Writable); err != nil {
			l.lost(c, err.Error())
			return false
		}
	}
	return true
}

func (l *loop) flush(c *client) bool {
	n, err := netpoll.Write(int(c.fd), c.out)
	if err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return true
		}
		l.lost(c, "write: "+err.Error())
		return false
	}
	if n < len(c.out) {
		c.out = c.out[:copy(c.out, c.out[n:])]
		return true
	}
	c.out = nil
	if err := l.poller.Mod(int(c.fd), netpoll.Readable); err != nil {
		l.lost(c, err.Error())
		return false
	}
	return true
}

func (l *loop) onReadable(c *client) {
	for range 4 {
		off := 0
		if c.pend != nil {
			off = copy(l.scratch, c.pend)
		}
		n, err := netpoll.Read(int(c.fd), l.scratch[off:])
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				return
			}
			l.lost(c, "read: "+err.Error())
			return
		}
		if n == 0 {
			l.lost(c, "the server closed the connection without a close frame")
			return
		}
		if c.pend != nil {
			l.putBuf(c.pend)
			c.pend = nil
		}
		buf := l.scratch[:off+n]
		used, need, alive := l.consume(c, buf, l.clock.now())
		if !alive {
			return
		}
		if used < len(buf) {
			c.pend = append(l.getBuf(len(buf)-used), buf[used:]...)
		}
		if need > len(l.scratch)-1024 {
			l.scratch = make([]byte, need+scratchSize)
		}
		if off+n < len(l.scratch) {
			return // the socket is drained
		}
	}
}

func (l *loop) getBuf(n int) []byte {
	if n <= pendBufSize {
		if k := len(l.bufs); k > 0 {
			b := l.bufs[k-1]
			l.bufs = l.bufs[:k-1]
			return b[:0]
		}
		return make([]byte, 0, pendBufSize)
	}
	return make([]byte, 0, n)
}

func (l *loop) putBuf(b []byte) {
	if cap(b) == pendBufSize && len(l.bufs) < 1024 {
		l.bufs = append(l.bufs, b[:0])
	}
}

// consume handles the handshake response and every whole frame in buf. It
// returns how many bytes it used, the size the incomplete frame at the end
// needs (0 if unknown), and false when the client was closed.
func (l *loop) consume(c *client, buf []byte, now int64) (used, need int, alive bool) {
	if c.state == csHandshake {
		n, got, err := ws.ParseServerHandshake(buf, c.key)
		if err != nil {
			l.fail(c, err.Error())
			return 0, 0, false
		}
		if n == 0 {
			return 0, 0, true
		}
		c.state = csJoining // upgraded: from now on a failure sends a close frame
		deflate, err := ws.ClientAcceptedDeflate(got.Extensions)
		switch {
		case err == nil && deflate && l.extensions == "":
			err = errors.New("ws: the server answered with an extension that was not offered")
		case err == nil && got.Protocol != l.wire.offer():
			err = errors.New("the server did not take subprotocol " + strconv.Quote(l.wire.offer()) +
				" (a server of the original five-field protocol? try --protocol legacy)")
		}
		if err != nil {
			l.fail(c, err.Error())
			return 0, 0, false
		}
		c.rd.SetDeflate(deflate)
		c.key = ""
		used = n
		l.upgraded(c, now)
		if c.gone() {
			return used, 0, false
		}
	}
	for used < len(buf) {
		f, n, need, err := c.rd.Next(buf[used:], ws.ClientSide, maxFrame)
		if err != nil {
			l.protocolError(c, ws.CodeOf(err), err.Error())
			return used, 0, false
		}
		if n == 0 {
			return used, need, true
		}
		used += n
		if f.Compressed {
			p, err := l.inflater.Inflate(l.inflated[:0], f, maxFrame)
			if err != nil {
				l.protocolError(c, ws.CodeOf(err), err.Error())
				return used, 0, false
			}
			l.inflated, f.Payload = p, p
		}
		switch f.OpCode {
		case ws.OpText, ws.OpBinary:
			if l.echoFrames {
				l.wbuf = ws.AppendMaskedFrame(l.wbuf[:0], f.OpCode, true, f.Payload, l.maskKey())
				l.write(c, l.wbuf)
			} else {
				l.onMessage(c, f.Payload, now)
			}
		case ws.OpPing:
			var fr [ws.MaxHeaderSize + ws.MaxControlPayload]byte
			l.write(c, ws.AppendMaskedFrame(fr[:0], ws.OpPong, true, f.Payload, l.maskKey()))
		case ws.OpClose:
			l.onClose(c, f.Payload)
			return used, 0, false
		}
		if c.gone() {
			return used, 0, false
		}
	}
	return used, 0, true
}

// protocolError fails the connection (RFC 6455 section 7.1.7): the close
// frame with code, then a wait for the server to close TCP.
func (l *loop) protocolError(c *client, code ws.StatusCode, why string) {
	l.sendClose(c, code)
	l.st.counts.Invalid++
	l.ended(c, "protocol error: "+why)
}

// onClose handles the server's close frame: the answer to ours, or its own,
// answered with the code ws.CloseReply gives (1002 for a malformed one,
// 1007 for a reason that is not UTF-8). Either way the server then closes
// TCP, and c waits for it.
func (l *loop) onClose(c *client, payload []byte) {
	if c.state == csClosing {
		l.awaitServerClose(c, l.st.closeDL)
		return
	}
	reply, code, err := ws.CloseReply(payload)
	if err != nil {
		l.protocolError(c, reply, err.Error())
		return
	}
	l.sendClose(c, reply)
	l.ended(c, serverClosed(code, payload))
}

// serverClosed says why the server closed a connection: its close code
// and, when it gave one, its reason, which names the limit a server past
// its capacity hit. payload is a close payload ws.CloseReply accepted.
func serverClosed(code ws.StatusCode, payload []byte) string {
	why := "the server closed the connection with code " + strconv.Itoa(int(code))
	if len(payload) > 2 {
		why += ": " + strconv.Quote(string(payload[2:]))
	}
	return why
}

// sendClose sends c's close frame, unless it is out already, and waits for
// the server to close TCP.
func (l *loop) sendClose(c *client, code ws.StatusCode) {
	if c.state == csClosing {
		l.awaitServerClose(c, l.st.closeDL)
		return
	}
	var fr [ws.MaxHeaderSize + ws.MaxControlPayload]byte
	if l.write(c, ws.AppendMaskedFrame(fr[:0], ws.OpClose, true, ws.AppendClosePayload(nil, code, ""), l.maskKey())) {
		l.awaitServerClose(c, l.clock.now()+closeWaitUs)
	}
}

func (c *client) membership(room int) *membership {
	for i := range c.rooms {
		if int(c.rooms[i].room) == room {
			return &c.rooms[i]
		}
	}
	return nil
}

// upgraded starts a client's way into its rooms, as its protocol says.
func (l *loop) upgraded(c *client, now int64) {
	switch l.wire.start() {
	case startReady:
		l.joinedRoom(c, &c.rooms[0], int(c.rooms[0].room), now)
	case startHello:
		l.pbuf = l.wire.appendHello(l.pbuf[:0])
		l.write(c, ws.AppendMaskedFrame(l.wbuf[:0], ws.OpText, true, l.pbuf, l.maskKey()))
	}
}

// sendJoins asks to join c.rooms[from:].
func (l *loop) sendJoins(c *client, from int) {
	l.wbuf = l.wbuf[:0]
	for i := from; i < len(c.rooms); i++ {
		l.pbuf = l.wire.appendJoin(l.pbuf[:0], l.st.plan, c.rooms[i].room, i+2)
		l.wbuf = ws.AppendMaskedFrame(l.wbuf, ws.OpText, true, l.pbuf, l.maskKey())
	}
	if len(l.wbuf) > 0 {
		l.write(c, l.wbuf)
	}
}

func (l *loop) onMessage(c *client, p []byte, now int64) {
	l.inb = l.wire.decode(p, l.inb[:0])
	for i := range l.inb {
		l.onInbound(c, &l.inb[i], p, now)
		if c.gone() {
			return
		}
	}
}

func (l *loop) onInbound(c *client, in *inbound, p []byte, now int64) {
	st := l.st
	plan := st.plan
	switch in.kind {
	case inInvalid:
		st.counts.Invalid++
	case inPing:
		l.write(c, ws.AppendMaskedFrame(l.wbuf[:0], ws.OpText, true, in.text, l.maskKey()))
	case inHello:
		if c.state == csJoining && c.nJoined == 0 {
			l.sendJoins(c, 0)
		}
	case inJoined:
		var m *membership
		switch {
		case in.room != nil:
			m = c.membership(plan.roomIndex(in.room))
		case in.reqID >= 2 && in.reqID-2 < uint64(len(c.rooms)):
			m = &c.rooms[in.reqID-2]
		}
		if m == nil || m.joined {
			st.counts.Invalid++
			return
		}
		m.joinedSeq, m.lastSeq = in.seq, in.seq
		l.joinedRoom(c, m, int(m.room), now)
	case inError:
		if c.state == csJoining {
			l.fail(c, "the server refused a join: "+string(p))
			return
		}
		st.counts.ServerErrors++
		switch {
		case bytes.Contains(in.text, rateLimitedCode):
			st.counts.RateLimited++
		case bytes.Contains(in.text, unavailableCode):
			st.counts.Unavailable++
		}
		// Kept apart from the connections' failures (a refusal leaves its
		// connection open), and built once: a step past a cluster's
		// capacity gets error frames by the hundred thousand.
		if st.first.server == "" {
			st.first.server = "server error: " + string(in.text)
		}
	case inMessage:
		l.onDelivery(c, in, now)
	}
}

// rateLimitedCode is the code of the scalechat protocol's error frame for a
// message refused by the server's rate limit (docs/protocol.md).
var rateLimitedCode = []byte(`"code":"rate_limited"`)

// unavailableCode is the code of the error frame for a message the server
// gave up: its cluster (Redis, the room's owner node) could not take it.
var unavailableCode = []byte(`"code":"unavailable"`)

// onDelivery checks that a chat message is one of this run's, sent to a
// room c is in, and records it.
func (l *loop) onDelivery(c *client, in *inbound, now int64) {
	st := l.st
	plan := st.plan
	var m *membership
	switch {
	case plan.echo:
		if c.state != csReady && c.state != csClosing {
			st.counts.Invalid++
			return
		}
		if in.sender == c.id {
			m = &c.rooms[0]
		}
	case in.room == nil && len(c.rooms) == 1:
		m = &c.rooms[0] // a server that does not name the room: the URL's
	default:
		m = c.membership(plan.roomIndex(in.room))
	}
	if !in.hasID || m == nil || !m.joined || !plan.inStep(in.sender) {
		st.counts.Unexpected++
		return
	}
	if in.hasSeq {
		if in.seq <= m.joinedSeq {
			st.counts.Replayed++ // history from before we joined: not a delivery of this run
			return
		}
		if in.seq <= m.lastSeq {
			st.counts.OutOfOrder++
		} else {
			m.lastSeq = in.seq
		}
	}
	st.counts.ReceivedAll++
	if plan.inShard(in.sender) {
		st.counts.Received++
	}
	if in.hasDue {
		record(l.lat, now-in.due)
	}
	l.rows = results.AppendEvent(l.rows, &results.Event{Step: st.name, Room: plan.roomName(int(m.room)), Kind: results.Received,
		MessageID: in.counter, SenderID: in.sender, ClientID: c.id, UnixUS: now, LagUS: -1})
	l.rowDone()
}

// joinedRoom records that c is in room r; when it is the URL room, c joins
// its other rooms.
func (l *loop) joinedRoom(c *client, m *membership, r int, now int64) {
	st := l.st
	m.joined = true
	c.nJoined++
	st.joined[r]++
	l.rows = results.AppendEvent(l.rows, &results.Event{Step: st.name, Room: st.plan.roomName(r), Kind: results.Joined, ClientID: c.id, UnixUS: now, LagUS: -1})
	l.rowDone()
	if c.nJoined == 1 && len(c.rooms) > 1 && l.wire.start() == startURL {
		l.sendJoins(c, 1)
		if c.gone() {
			return
		}
	}
	if int(c.nJoined) == len(c.rooms) {
		l.ready(c)
	}
}
