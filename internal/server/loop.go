//go:build linux

package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/histogram"
	"github.com/scalechat/scalechat/internal/netpoll"
	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/ws"
)

const (
	readBufferSize   = 64 << 10
	maxReadsPerEvent = 4    // then let other connections have their turn (epoll is level-triggered)
	maxIovecs        = 1024 // IOV_MAX on Linux
	pollBatch        = 256  // descriptors one poll hands the loop at most
)

// member is a connection's place in a room on one loop. minSeq hides the
// messages the connection already got from the history replay.
type member struct {
	c      *conn
	minSeq uint64
}

// pendingJoin is a join waiting for its room to load from the broker.
type pendingJoin struct {
	c   *conn
	rs  room.Resume
	url bool
}

// localRoom is the part of a room's membership that lives on one loop.
type localRoom struct {
	members []member
}

type commandKind uint8

const (
	cmdAdd        commandKind = iota // a new connection, upgraded by an HTTP handler
	cmdQuiesce                       // stop reading connections: no more publishes from this loop
	cmdDrain                         // close every connection with 1001
	cmdStop                          // close what is left and return
	cmdDisconnect                    // close the connections a disconnect request names
	cmdRefused                       // tell a connection the broker gave its message up
	cmdHook                          // a join or publish hook's verdict for a connection
	cmdUnlisten                      // stop accepting connections (accept.go)
	cmdHandshake                     // read the request of a connection another loop accepted
)

type command struct {
	kind      commandKind
	fd        int
	room      string
	since     uint64
	hasSince  bool
	epoch     string // the stream since belongs to ("" from older clients)
	pending   []byte // bytes the HTTP server read past the upgrade request
	echo      bool   // an /echo connection
	deflate   bool   // permessage-deflate was negotiated
	control   bool   // the client speaks protocol.Subprotocol: send it control frames
	claims    *auth.Claims
	name      string // the user the client says it is, without a token
	presence  bool   // the client wants presence events
	ip        netip.Addr
	ipCounted bool              // counted by the address limiter: release on close
	id        uint64            // the connection's number on this node; cmdRefused: the publish's ID (refused.go)
	reason    string            // cmdRefused: what the sender is told
	disc      broker.Disconnect // cmdDisconnect
	conn      *conn             // cmdHook: the connection
	hook      *hookResult       // cmdHook
	hookUser  string            // who the connect hook says the connection is
	hookData  json.RawMessage   // the connect hook's data, handed back in the connection's hook calls
	hookRooms []string          // rooms the connect hook joins besides the URL's
	// registered: the loop accepted fd and its poller watches it already.
	registered bool
	ack        chan struct{} // cmdUnlisten: closed once the loop no longer accepts
	slot       *connSlot     // cmdHandshake: the connection's share of the caps
}

// loop is an event loop: one goroutine that owns a set of connections, reads
// them, delivers room messages to them and writes them.
type loop struct {
	id     int
	srv    *Server
	poller *netpoll.Poller
	queue  *room.Queue

	cmdMu sync.Mutex
	cmds  []command

	conns      []*conn // by fd
	nconns     int
	rooms      map[*room.Room]*localRoom
	pending    map[*room.Room][]pendingJoin
	hooked     map[*conn]*connHooks // connections with hook data or messages waiting for the publish hook
	held       map[*conn]*heldChat  // five-field connections whose URL's room loads (held.go)
	dirty      []*conn              // connections with frames to write
	slow       []*conn              // slow consumers to close once delivery is done
	deliveries []room.Delivery
	received   []int64 // read times of the messages delivered since the last flush, for Stats.Processing
	readBuf    []byte
	enc        []byte
	hist       []room.Message
	iov        []unix.Iovec
	frame      protocol.Frame
	inflater   ws.Inflater // permessage-deflate: no context carries over, so one serves every connection
	inflated   []byte      // the last message inflated
	wheel      wheel

	// The accept side (accept.go).
	lfd          int                // the listening socket, when the server has one for the loops
	listening    bool               // the poller watches the listening socket
	unlistened   bool               // cmdUnlisten came: never again
	acceptAt     int64              // after a failed accept: watch the socket again then; 0: no pause
	acceptLogged int64              // when a failed accept was last logged
	shakes       map[int]*handshake // connections whose request is being read, by fd
	shakeq       []*handshake       // the same, in the order of their deadlines
	answer       []byte             // the answer to an upgrade being written
	view         upgradeView        // the head of the upgrade at hand (accept.go)

	nowNano      int64
	lag          lagMeter // whether what this pass reads waited past Config.MaxLoopLag (lag.go)
	closeTimeout time.Duration
	draining     bool
	drained      chan struct{} // closed when draining and no connection is left
	// quiet is set between cmdQuiesce and cmdDrain: the loop reads
	// nothing, so it publishes nothing, while the other loops stop too.
	quiet        bool
	quiesced     chan struct{} // closed when quiet
	rateMessage  string
	roomsMessage string

	stats loopStats
}

func newLoop(id int, srv *Server) (*loop, error) {
	p, err := netpoll.New(pollBatch)
	if err != nil {
		return nil, err
	}
	l := &loop{
		id:           id,
		srv:          srv,
		lag:          lagMeter{max: int64(srv.cfg.MaxLoopLag)},
		stats:        loopStats{processing: histogram.New(processingBounds...)},
		poller:       p,
		rooms:        make(map[*room.Room]*localRoom),
		pending:      make(map[*room.Room][]pendingJoin),
		hooked:       make(map[*conn]*connHooks),
		held:         make(map[*conn]*heldChat),
		shakes:       make(map[int]*handshake),
		readBuf:      make([]byte, max(readBufferSize, srv.cfg.largestMessage()+ws.MaxHeaderSize+readBufferSize/2)),
		iov:          make([]unix.Iovec, maxIovecs),
		closeTimeout: srv.cfg.CloseTimeout,
		drained:      make(chan struct{}),
		quiesced:     make(chan struct{}),
		rateMessage:  fmt.Sprintf("more than %g messages per second", srv.cfg.RateLimit),
		roomsMessage: fmt.Sprintf("a connection may be in at most %d rooms", srv.cfg.MaxRoomsPerConn),
	}
	l.queue = room.NewQueue(l.wake)
	l.wheel = newWheel(srv.cfg.PingInterval, srv.cfg.PongTimeout)
	return l, nil
}

func (l *loop) wake() {
	if err := l.poller.Wake(); err != nil {
		l.srv.log.Error("wake event loop", "loop", l.id, "err", err)
	}
}

func (l *loop) command(c command) {
	l.cmdMu.Lock()
	l.cmds = append(l.cmds, c)
	l.cmdMu.Unlock()
	l.wake()
}

// run is the loop's goroutine. It returns after a cmdStop.
func (l *loop) run() error {
	defer l.poller.Close()
	now := time.Now()
	l.nowNano = now.UnixNano()
	l.wheel.start(l.nowNano)
	for {
		events, woken, err := l.poller.Wait(l.waitTimeoutMs())
		if err != nil {
			l.stopAll()
			return err
		}
		l.nowNano = time.Now().UnixNano()
		l.lag.begin(l.nowNano, len(events) < pollBatch)
		for _, ev := range events {
			if ev.FD >= len(l.conns) || l.conns[ev.FD] == nil {
				l.onOther(ev) // the listening socket, a handshake
				continue
			}
			c := l.conns[ev.FD]
			if ev.Events&netpoll.Writable != 0 && c.wantWrite {
				l.flush(c)
			}
			if ev.Events&(netpoll.Readable|netpoll.Hangup) != 0 && c.state != stateClosed && !l.quiet {
				l.onReadable(c)
			}
		}
		if woken && l.runCommands() {
			return nil
		}
		l.expireHandshakes()
		if l.acceptAt != 0 && l.nowNano >= l.acceptAt {
			l.resumeAccept()
		}
		l.deliver()
		l.flushDirty()
		l.observeProcessing()
		for l.nowNano >= l.wheel.next {
			l.sweep()
		}
		if l.draining && l.nconns == 0 {
			select {
			case <-l.drained:
			default:
				close(l.drained)
			}
		}
		if l.lag.max > 0 {
			l.lag.end(time.Now().UnixNano())
		}
	}
}

// runCommands handles the commands queued by other goroutines and reports
// whether the loop must stop.
func (l *loop) runCommands() (stop bool) {
	l.cmdMu.Lock()
	cmds := l.cmds
	l.cmds = nil
	l.cmdMu.Unlock()
	for _, cmd := range cmds {
		switch cmd.kind {
		case cmdAdd:
			l.add(cmd)
		case cmdQuiesce:
			l.quiet = true
			close(l.quiesced)
		case cmdDrain:
			l.drain()
		case cmdStop:
			l.stopAll()
			return true
		case cmdDisconnect:
			l.disconnect(cmd.disc, cmd.id)
		case cmdRefused:
			l.refused(cmd.id, cmd.pending, cmd.reason)
		case cmdHook:
			l.hookDone(cmd.conn, cmd.hook)
		case cmdUnlisten:
			l.stopAccepting(cmd.ack)
		case cmdHandshake:
			l.takeHandshake(cmd.fd, cmd.slot)
		}
	}
	return false
}

func (l *loop) add(cmd command) {
	c := &conn{id: cmd.id, fd: cmd.fd, loop: l, lastRead: l.nowNano, opened: l.nowNano, slot: -1, echo: cmd.echo, deflate: cmd.deflate, control: cmd.control,
		user: cmd.name, presence: cmd.presence && cmd.control}
	c.rd.SetDeflate(cmd.deflate)
	c.tokens = float64(l.srv.cfg.RateBurst)
	c.abuse = float64(l.srv.cfg.RateAbuse)
	if cmd.ipCounted {
		c.ip = cmd.ip
		c.ipCounted = true
	}
	if cmd.claims != nil {
		c.sender = cmd.claims.Subject
		c.user = cmd.claims.Subject // the token says who it is
		c.allowed = cmd.claims.Rooms
		c.expires = cmd.claims.Expires.UnixNano()
		c.limitRooms = cmd.claims.Rooms != nil
	}
	if cmd.hookUser != "" {
		c.sender, c.user = cmd.hookUser, cmd.hookUser // the backend says who it is
	}
	if cmd.registered {
		// Accepted on this loop: its poller watches the socket already.
	} else if err := l.poller.Add(cmd.fd, netpoll.Readable); err != nil {
		l.srv.log.Error("register connection", "err", err)
		unix.Close(cmd.fd)
		l.srv.conns.Add(-1)
		if c.ipCounted {
			l.srv.ips.release(c.ip)
		}
		return
	}
	for cmd.fd >= len(l.conns) {
		l.conns = append(l.conns, make([]*conn, max(1024, len(l.conns)))...)
	}
	l.conns[cmd.fd] = c
	l.nconns++
	if l.draining {
		c.closeWith(ws.CloseGoingAway, "server shutting down")
		return
	}
	if !c.echo {
		c.join([]byte(cmd.room), room.Resume{Since: cmd.since, HasSince: cmd.hasSince, Epoch: cmd.epoch}, true)
		l.addHooked(c, &cmd)
	}
	l.reschedule(c)
	if len(cmd.pending) > 0 {
		c.pending = cmd.pending
		l.consume(c, nil)
	}
}

// drain closes every connection with 1001 after delivering what the rooms
// already accepted. Every loop is quiet by then (Server.shutdown), so the
// queue holds every message any loop accepted: a loop that drained first
// no longer closes its members while another still reads new messages
// for them.
func (l *loop) drain() {
	l.draining = true
	l.quiet = false // closing connections are read again for the peer's close frame; they publish nothing
	l.deliver()
	l.closeTimeout = l.srv.cfg.ShutdownTimeout
	for _, c := range l.conns {
		if c != nil {
			c.closeWith(ws.CloseGoingAway, "server shutting down")
		}
	}
}

func (l *loop) stopAll() {
	l.closeHandshakes()
	for _, c := range l.conns {
		if c != nil && c.state != stateClosed {
			c.leaveAll()
			l.closeFD(c)
		}
	}
}

// onReadable reads what c has sent and handles every complete frame.
func (l *loop) onReadable(c *conn) {
	for range maxReadsPerEvent {
		k := copy(l.readBuf, c.pending)
		n, err := netpoll.Read(c.fd, l.readBuf[k:])
		if n > 0 {
			c.lastRead = l.nowNano
			c.pinged = false
			l.stats.bytesIn.Add(uint64(n))
			l.consume(c, l.readBuf[:k+n])
			if c.state == stateClosed || k+n < len(l.readBuf) {
				return
			}
			continue
		}
		switch {
		case errors.Is(err, unix.EAGAIN):
			return
		case errors.Is(err, unix.EINTR):
			continue
		}
		// EOF or a socket error: the peer is gone.
		if c.state == stateOpen {
			c.closeCode = ws.CloseAbnormal
		}
		c.leaveAll()
		l.closeFD(c)
		return
	}
}

// consume handles the frames in data (or in c.pending when data is nil) and
// keeps an incomplete frame in c.pending.
func (l *loop) consume(c *conn, data []byte) {
	if data == nil {
		data = append(l.readBuf[:0], c.pending...)
	}
	n := c.process(data)
	if c.state == stateClosed || n == len(data) {
		c.pending = nil
	} else {
		// data lives in readBuf, never in c.pending, so c.pending can be reused.
		c.pending = append(c.pending[:0], data[n:]...)
	}
	partial := c.pending != nil || c.rd.Pending()
	switch {
	case c.state != stateOpen:
	case partial && c.partialSince == 0:
		c.partialSince = l.nowNano
		l.reschedule(c)
	case !partial:
		c.partialSince = 0
	}
}

// deliver hands every queued room message to the local members of its room.
func (l *loop) deliver() {
	l.deliveries = l.queue.Swap(l.deliveries)
	var n uint64
	timed := l.srv.cfg.ProcessingTime
	for i := range l.deliveries {
		d := &l.deliveries[i]
		if d.Ready {
			l.joinWaiting(d.Room)
			continue
		}
		if d.Dropped {
			l.dropRoom(d.Room)
			continue
		}
		if d.Presence != nil {
			l.presenceEvent(d.Room, d.Presence)
			continue
		}
		lr := l.rooms[d.Room]
		if lr == nil {
			continue
		}
		before := n
		for _, m := range lr.members {
			if d.Seq > m.minSeq && m.c.enqueueShared(m.c.frameOf(&d.Message)) {
				n++
			}
		}
		if timed && n > before && d.Received != 0 {
			l.received = append(l.received, d.Received)
		}
	}
	l.stats.deliveries.Add(n)
	for _, c := range l.slow {
		c.closeSlow()
	}
	clear(l.slow)
	l.slow = l.slow[:0]
}

// presenceEvent sends a presence_join or presence_leave frame to the
// room's members on this loop that asked for them.
func (l *loop) presenceEvent(r *room.Room, frame []byte) {
	lr := l.rooms[r]
	if lr == nil {
		return
	}
	for _, m := range lr.members {
		if m.c.presence { // only clients with control frames ask for them
			// Not enqueueControl: it would take frame, shared by every
			// loop, as this loop's encoding buffer and write over it.
			m.c.enqueueOwn(ws.TextFrame(frame))
		}
	}
}

// dropRoom closes the members of a room the hub dropped (another node took
// its stream over) with 1012: they reconnect and resume in the room loaded
// anew. Joiners that waited for it join the new room.
func (l *loop) dropRoom(r *room.Room) {
	if lr := l.rooms[r]; lr != nil {
		members := append([]member(nil), lr.members...)
		for _, m := range members {
			m.c.closeWith(ws.CloseServiceRestart, "the room's stream changed: reconnect and resume")
		}
	}
	l.joinWaiting(r)
}

// joinWaiting joins the connections that waited for r to load.
func (l *loop) joinWaiting(r *room.Room) {
	waiting := l.pending[r]
	delete(l.pending, r)
	for _, pj := range waiting {
		c := pj.c
		if c.state != stateOpen {
			continue
		}
		for i, w := range c.waiting {
			if w == r.Name() {
				c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
				break
			}
		}
		if len(c.waiting) == 0 {
			c.waiting = nil
		}
		c.join([]byte(r.Name()), pj.rs, pj.url)
	}
}

func (l *loop) flushDirty() {
	// Index loop: flushing a slow consumer queues its close frame, which
	// appends to l.dirty.
	for i := 0; i < len(l.dirty); i++ {
		c := l.dirty[i]
		c.dirty = false
		if c.state != stateClosed {
			l.flush(c)
		}
		l.dirty[i] = nil
	}
	l.dirty = l.dirty[:0]
}

// flush writes c's queue with as few writev calls as the kernel allows.
func (l *loop) flush(c *conn) {
	for c.outHead < len(c.out) {
		iov := l.iov[:0]
		for i := c.outHead; i < len(c.out) && len(iov) < maxIovecs; i++ {
			b := c.out[i]
			if i == c.outHead {
				b = b[c.outOff:]
			}
			if len(b) == 0 {
				continue
			}
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
		if len(iov) == 0 { // only empty frames left
			clear(c.out)
			c.out, c.outHead, c.outOff = c.out[:0], 0, 0
			break
		}
		// RawSyscall: the socket is non-blocking, so writev returns in
		// microseconds and never parks. Syscall's entersyscall/exitsyscall
		// would let sysmon see the loop's P "in a syscall" at one writev a
		// delivery, retake it and wake another thread for nothing
		// (docs/benchmarks-log.md, "Where each µs of a delivery goes").
		r, _, errno := unix.RawSyscall(unix.SYS_WRITEV, uintptr(c.fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		clear(iov) // drop the pointers into frames
		if errno != 0 {
			switch errno {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				if c.state == stateOpen && c.outBytes > c.queueLimit() {
					c.closeSlow()
				}
				if !c.wantWrite {
					c.wantWrite = true
					if err := l.poller.Mod(c.fd, netpoll.Readable|netpoll.Writable); err != nil {
						l.srv.log.Error("watch writability", "err", err)
					}
				}
				return
			}
			c.closeCode = ws.CloseAbnormal
			c.leaveAll()
			l.closeFD(c)
			return
		}
		n := int(r)
		l.stats.bytesOut.Add(uint64(n))
		c.outBytes -= n
		for n > 0 {
			rest := len(c.out[c.outHead]) - c.outOff
			if n < rest {
				c.outOff += n
				break
			}
			n -= rest
			c.out[c.outHead] = nil
			c.outHead++
			c.outOff = 0
		}
	}
	// Everything is written.
	if cap(c.out) > 8 {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	c.outHead, c.outOff, c.outBytes = 0, 0, 0
	if c.wantWrite {
		c.wantWrite = false
		if err := l.poller.Mod(c.fd, netpoll.Readable); err != nil {
			l.srv.log.Error("unwatch writability", "err", err)
		}
	}
	if c.closeQueued && (c.peerClosed || c.failed) {
		l.closeFD(c)
	}
}

// observeProcessing records the processing time of the messages delivered
// since the last call, now that the flush has written them: one clock read
// per loop iteration, whatever the number of messages and members.
func (l *loop) observeProcessing() {
	if len(l.received) == 0 {
		return
	}
	now := time.Now().UnixNano()
	for _, r := range l.received {
		l.stats.processing.Observe(time.Duration(now - r))
	}
	l.received = l.received[:0]
}

// closeFD closes c's socket. c must have left its rooms.
func (l *loop) closeFD(c *conn) {
	if c.state == stateClosed {
		return
	}
	c.state = stateClosed
	if c.closeCode == 0 {
		c.closeCode = ws.CloseAbnormal
	}
	l.stats.disconnects[closeCodeIndex(c.closeCode)].Add(1)
	l.conns[c.fd] = nil
	l.nconns--
	l.hookGone(c)
	delete(l.hooked, c)
	delete(l.held, c)
	if err := unix.Close(c.fd); err != nil {
		l.srv.log.Debug("close socket", "err", err)
	}
	clear(c.out)
	c.out, c.pending = nil, nil
	c.rd.Reset()
	// The address first: a count of connections that fell tells that
	// everything the connection held is given back.
	if c.ipCounted {
		l.srv.ips.release(c.ip)
	}
	l.srv.conns.Add(-1)
}

func (l *loop) schedule(c *conn, at int64) {
	c.nextAt = at
	l.wheel.add(c, at)
}

// reschedule puts an open connection in the wheel at its next deadline,
// unless it is already due earlier.
func (l *loop) reschedule(c *conn) {
	at := c.nextDeadline(&l.srv.cfg)
	if c.slot < 0 || at < c.nextAt {
		l.schedule(c, at)
	}
}

// sweep handles the connections whose timer is due: pings idle ones,
// closes silent ones, stalled frames, expired tokens, and closing
// handshakes that took too long.
func (l *loop) sweep() {
	cfg := &l.srv.cfg
	now := l.nowNano
	due := l.wheel.advance()
	for _, c := range due {
		switch {
		case c.state == stateClosed:
		case c.state == stateClosing:
			if now >= c.deadline {
				l.closeFD(c)
			} else {
				l.schedule(c, c.deadline)
			}
		case now-c.lastRead >= int64(cfg.PongTimeout):
			c.closeCode = ws.CloseAbnormal
			c.leaveAll()
			l.closeFD(c)
		case c.partialSince != 0 && cfg.FrameTimeout > 0 && now-c.partialSince >= int64(cfg.FrameTimeout):
			l.stats.dropped[DropTimeout].Add(1)
			c.closeWith(ws.ClosePolicyViolation, "frame not completed in time")
		case !c.gotFrame && cfg.FirstFrameTimeout > 0 && now-c.opened >= int64(cfg.FirstFrameTimeout):
			l.stats.dropped[DropTimeout].Add(1)
			c.closeWith(ws.ClosePolicyViolation, "no frame in time")
		case c.expires != 0 && now >= c.expires:
			c.closeWith(ws.ClosePolicyViolation, "token expired")
		default:
			if now-c.lastRead >= int64(cfg.PingInterval) && !c.pinged {
				c.pinged = true
				c.enqueueOwn(ws.AppendFrame(nil, ws.OpPing, true, nil))
			}
			l.schedule(c, c.nextDeadline(cfg))
		}
	}
	l.wheel.release(due)
	l.flushDirty()
}
