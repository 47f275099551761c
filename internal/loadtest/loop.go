package loadtest

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/netpoll"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/ws"
)

// Tuning of one event loop.
const (
	scratchSize    = 256 << 10   // read buffer shared by the loop's connections
	maxFrame       = 64 << 20    // larger frames close the connection (1009)
	pendBufSize    = 4 << 10     // pooled buffer for an incomplete frame
	maxInflight    = 2048        // connects + handshakes + joins at once, per loop
	tickUs         = 100_000     // housekeeping period
	maxSendsPerRun = 8192        // sends before looking at sockets again
	histMaxUs      = 100_000_000 // latencies above 100 s are recorded as 100 s
)

// clock gives microseconds since the Unix epoch from the monotonic clock,
// so steps of the wall clock during a run do not bend the figures.
type clock struct {
	base   time.Time
	baseUs int64
}

func newClock() *clock {
	t := time.Now()
	return &clock{base: t, baseUs: t.UnixMicro()}
}

func (c *clock) now() int64 { return c.baseUs + int64(time.Since(c.base)/time.Microsecond) }

func (c *clock) time(us int64) time.Time { return time.UnixMicro(us) }

type clientState uint8

const (
	csIdle       clientState = iota // not connected yet
	csConnecting                    // connect(2) in progress
	csHandshake                     // upgrade request sent
	csJoining                       // upgraded, waiting for joined frames
	csReady                         // in all its rooms
	csClosing                       // close frame sent
	csClosed                        // closed after being ready
	csFailed                        // never became ready
)

// membership is one room a client joined.
type membership struct {
	room      int32
	joined    bool
	joinedSeq uint64 // the joined frame's seq: replayed history is <= it
	lastSeq   uint64
}

// client is one simulated chat client. Idle clients own no buffers.
type client struct {
	fd      int32
	state   clientState
	rr      uint16 // next room to post into (round robin)
	counter uint32 // last message counter used
	nJoined int32
	c       int32 // index in the step
	src     int32 // index of the source address, -1 for none
	id      uint64
	phase   int64 // µs offset of its sends within the interval
	startUs int64 // when its connect began
	dueUs   int64 // when its connect was due by the ramp
	rooms   []membership
	key     string    // Sec-WebSocket-Key while the handshake is in flight
	pend    []byte    // start of an incomplete frame
	out     []byte    // bytes the socket did not take yet
	rd      ws.Reader // holds a fragmented message being assembled
}

// loopStep is a loop's share of one step. Owned by the loop goroutine
// except where noted.
type loopStep struct {
	plan     *stepPlan
	name     string
	text     string
	clients  []*client
	next     int // next client to connect
	connT0   int64
	connGap  float64 // µs between connects of this loop
	inflight int
	unsettle int // clients neither ready nor failed
	settled  chan struct{}
	joined   []int64 // per room, this loop's joins

	sending    bool
	t0, endUs  int64
	intervalUs int64
	order      []*client // ready clients sorted by phase
	cursor     int
	round      int64
	global     []int64 // per room, joined clients of the whole run part (read-only)

	closing bool
	closeDL int64
	open    int
	closed  chan struct{}

	counts   stepCounts
	firstErr string
}

// stepCounts are one process's (or one loop's) counts of a step.
type stepCounts struct {
	Clients       int64 `json:"clients"`
	Joined        int64 `json:"joined"`
	Sent          int64 `json:"sent"`
	Expected      int64 `json:"expected"`
	Received      int64 `json:"received"`     // deliveries of messages sent by this shard
	ReceivedAll   int64 `json:"received_all"` // every delivery, whoever sent it
	ConnectErrors int64 `json:"connect_errors"`
	Disconnects   int64 `json:"disconnects"`
	ServerErrors  int64 `json:"server_errors"`
	Replayed      int64 `json:"replayed"`
	OutOfOrder    int64 `json:"out_of_order"`
	Invalid       int64 `json:"invalid"`
	// The HTTP transport only.
	SendErrors  int64 `json:"send_errors,omitempty"`  // POSTs refused, failed or timed out
	PollErrors  int64 `json:"poll_errors,omitempty"`  // polls refused, failed or timed out
	HistoryGaps int64 `json:"history_gaps,omitempty"` // poll answers saying messages were no longer held
}

func (a *stepCounts) add(b stepCounts) {
	a.Clients += b.Clients
	a.Joined += b.Joined
	a.Sent += b.Sent
	a.Expected += b.Expected
	a.Received += b.Received
	a.ReceivedAll += b.ReceivedAll
	a.ConnectErrors += b.ConnectErrors
	a.Disconnects += b.Disconnects
	a.ServerErrors += b.ServerErrors
	a.Replayed += b.Replayed
	a.OutOfOrder += b.OutOfOrder
	a.Invalid += b.Invalid
	a.SendErrors += b.SendErrors
	a.PollErrors += b.PollErrors
	a.HistoryGaps += b.HistoryGaps
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMaxUs, 3) }

func record(h *hdrhistogram.Histogram, v int64) {
	if v < 0 {
		v = 0 // clocks of different machines (shards) may disagree
	}
	if v > histMaxUs {
		v = histMaxUs
	}
	_ = h.RecordValue(v)
}

// loop runs clients on one goroutine with epoll.
type loop struct {
	id      int
	cfg     *Config
	tgt     target
	srcs    []netip.Addr
	clock   *clock
	rec     *Recorder
	poller  *netpoll.Poller
	tfd     int
	armedUs int64

	rows      []byte
	lastFlush int64
	scratch   []byte
	pbuf      []byte
	wbuf      []byte
	fds       []*client
	bufs      [][]byte
	rng       uint64
	ff        frameFields
	nextTick  int64

	cmdMu sync.Mutex
	cmds  []func()
	quit  bool
	done  chan struct{}
	err   error // fatal loop error, read after done

	st *loopStep

	lat, lag         *hdrhistogram.Histogram // this tick
	stepLat, stepLag *hdrhistogram.Histogram // this step, loop only
	stepConn         *hdrhistogram.Histogram // connect times of this step, loop only
	mu               sync.Mutex              // guards pubLat, pubLag
	pubLat, pubLag   *hdrhistogram.Histogram // since the collector last looked

	// Progress counters, stored by the loop once per tick.
	aConnected, aConnErr, aDisc, aSent, aRecv, aExpected atomic.Int64
}

func newLoop(id int, cfg *Config, tgt target, clk *clock, rec *Recorder) (*loop, error) {
	p, err := netpoll.New(512)
	if err != nil {
		return nil, err
	}
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	if err := p.Add(tfd, netpoll.Readable); err != nil {
		p.Close()
		unix.Close(tfd)
		return nil, err
	}
	l := &loop{
		id: id, cfg: cfg, tgt: tgt, srcs: cfg.SourceIPs, clock: clk, rec: rec, poller: p, tfd: tfd,
		scratch: make([]byte, scratchSize),
		rng:     uint64(time.Now().UnixNano()) | 1 + uint64(id)<<1,
		done:    make(chan struct{}),
		lat:     newHist(), lag: newHist(), stepLat: newHist(), stepLag: newHist(), stepConn: newHist(), pubLat: newHist(), pubLag: newHist(),
	}
	l.rows = rec.Buffer()
	return l, nil
}

// do runs f on the loop goroutine.
func (l *loop) do(f func()) {
	l.cmdMu.Lock()
	l.cmds = append(l.cmds, f)
	l.cmdMu.Unlock()
	_ = l.poller.Wake()
}

// call runs f on the loop goroutine and waits for it.
func (l *loop) call(f func()) {
	ch := make(chan struct{})
	l.do(func() { f(); close(ch) })
	select {
	case <-ch:
	case <-l.done:
		// The loop stopped (hard stop) and runs nothing more, so f runs
		// here, unless the loop ran it before stopping.
		select {
		case <-ch:
		default:
			f()
		}
	}
}

func (l *loop) run() {
	defer close(l.done)
	defer l.shutdown()
	for !l.quit {
		now := l.clock.now()
		timeout := l.arm(now)
		evs, woken, err := l.poller.Wait(timeout)
		if err != nil {
			l.err = err
			return
		}
		if woken {
			l.runCmds()
		}
		for _, ev := range evs {
			if ev.FD == l.tfd {
				var b [8]byte
				_, _ = unix.Read(l.tfd, b[:])
				continue
			}
			if ev.FD < len(l.fds) {
				if c := l.fds[ev.FD]; c != nil {
					l.handle(c, ev.Events)
				}
			}
		}
		l.tick(l.clock.now())
	}
}

func (l *loop) runCmds() {
	l.cmdMu.Lock()
	cmds := l.cmds
	l.cmds = nil
	l.cmdMu.Unlock()
	for _, f := range cmds {
		f()
	}
}

// arm sets the timer for the next thing due and returns the epoll timeout.
func (l *loop) arm(now int64) int {
	wake := now + tickUs
	if st := l.st; st != nil {
		if st.sending && len(st.order) > 0 {
			wake = min(wake, st.t0+st.order[st.cursor].phase+st.round*st.intervalUs, st.endUs)
		}
		if st.next < len(st.clients) && st.inflight < maxInflight {
			wake = min(wake, st.connT0+int64(float64(st.next)*st.connGap))
		}
		if st.closing {
			wake = min(wake, st.closeDL)
		}
	}
	wake = min(wake, l.nextTick)
	if wake <= now {
		return 0
	}
	if wake != l.armedUs {
		d := (wake - now) * 1000
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d)}
		if err := unix.TimerfdSettime(l.tfd, 0, &spec, nil); err == nil {
			l.armedUs = wake
		}
	}
	return int(tickUs/1000) + 1
}

func (l *loop) tick(now int64) {
	st := l.st
	if st != nil {
		l.connectDue(now)
		if st.sending {
			l.sendDue(now)
		}
	}
	if now >= l.nextTick {
		l.nextTick = now + tickUs
		l.housekeep(now)
	}
}

// housekeep times out stuck connects and closes, publishes statistics and
// hands rows to the writer at least once a second.
func (l *loop) housekeep(now int64) {
	if st := l.st; st != nil {
		if st.unsettle > 0 {
			limit := now - int64(l.cfg.ConnectTimeout.D()/time.Microsecond)
			for _, c := range st.clients[:st.next] {
				if c.state >= csConnecting && c.state <= csJoining && c.startUs < limit {
					l.fail(c, "no answer within the connect timeout")
				}
			}
		}
		if st.closing && now >= st.closeDL {
			for _, c := range st.clients {
				if c.fd >= 0 {
					l.closeFD(c)
				}
			}
			l.checkClosed()
		}
	}
	l.publish()
	if len(l.rows) > 0 && now-l.lastFlush >= 1_000_000 {
		l.flushRows(now)
	}
}

func (l *loop) publish() {
	if l.lat.TotalCount() > 0 || l.lag.TotalCount() > 0 {
		l.mu.Lock()
		l.pubLat.Merge(l.lat)
		l.pubLag.Merge(l.lag)
		l.mu.Unlock()
		l.stepLat.Merge(l.lat)
		l.stepLag.Merge(l.lag)
		l.lat.Reset()
		l.lag.Reset()
	}
	if st := l.st; st != nil {
		l.aSent.Store(st.counts.Sent)
		l.aRecv.Store(st.counts.Received)
		l.aExpected.Store(st.counts.Expected)
		l.aConnErr.Store(st.counts.ConnectErrors)
		l.aDisc.Store(st.counts.Disconnects)
	}
}

// takePublished swaps out the histograms published since the last call.
// Called by the progress collector.
func (l *loop) takePublished(lat, lag *hdrhistogram.Histogram) {
	l.mu.Lock()
	lat.Merge(l.pubLat)
	lag.Merge(l.pubLag)
	l.pubLat.Reset()
	l.pubLag.Reset()
	l.mu.Unlock()
}

func (l *loop) flushRows(now int64) {
	l.rec.Submit(l.rows)
	l.rows = l.rec.Buffer()
	l.lastFlush = now
}

func (l *loop) rowDone() {
	if len(l.rows) >= chunkSize {
		l.flushRows(l.clock.now())
	}
}

// beginStep starts connecting the step's clients of this loop.
func (l *loop) beginStep(st *loopStep, ramp float64) {
	l.st = st
	st.settled = make(chan struct{})
	st.closed = make(chan struct{})
	st.connT0 = l.clock.now()
	st.connGap = 1e6 / ramp
	st.unsettle = len(st.clients)
	st.counts.Clients = int64(len(st.clients))
	st.joined = make([]int64, st.plan.rooms())
	l.stepLat.Reset()
	l.stepLag.Reset()
	l.stepConn.Reset()
	l.aConnected.Store(0)
	l.publish()
	l.checkSettled()
}

func (l *loop) checkSettled() {
	st := l.st
	if st.unsettle == 0 && st.next == len(st.clients) && st.settled != nil {
		select {
		case <-st.settled:
		default:
			close(st.settled)
		}
	}
}

// abortConnects gives up on clients not connected yet (Ctrl+C while
// connecting): they count neither as joined nor as errors.
func (l *loop) abortConnects() {
	st := l.st
	for _, c := range st.clients {
		if c.state == csIdle || (c.state >= csConnecting && c.state <= csJoining) {
			if c.fd >= 0 {
				l.closeFD(c)
			}
			if c.state != csIdle {
				st.inflight--
			}
			c.state = csFailed
			st.unsettle--
		}
	}
	st.next = len(st.clients)
	l.checkSettled()
}

// startSending begins the open-loop schedule at t0 (µs) until end.
func (l *loop) startSending(t0, end int64, interval time.Duration, global []int64) {
	st := l.st
	st.global = global
	st.t0, st.endUs = t0, end
	st.intervalUs = int64(interval / time.Microsecond)
	st.order = st.order[:0]
	for _, c := range st.clients {
		if c.state == csReady && st.plan.sends(int(c.c)) {
			c.phase = int64(l.rand() % uint64(st.intervalUs))
			st.order = append(st.order, c)
		}
	}
	sortByPhase(st.order)
	st.cursor, st.round = 0, 0
	st.sending = len(st.order) > 0 && st.intervalUs > 0
}

func sortByPhase(cs []*client) {
	// Insertion into buckets would do; the standard sort is fast enough
	// for a once-per-step call.
	sortSlice(cs, func(a, b *client) bool { return a.phase < b.phase })
}

// stopSending ends the schedule now (Ctrl+C).
func (l *loop) stopSending() {
	if st := l.st; st != nil {
		st.sending = false
		st.endUs = min(st.endUs, l.clock.now())
	}
}

// closeAll sends a close frame (1000) to every connection and closes what
// is still open at deadline.
func (l *loop) closeAll(deadline int64) {
	st := l.st
	st.sending = false
	st.closing = true
	st.closeDL = deadline
	var fr [16]byte
	for _, c := range st.clients {
		switch c.state {
		case csReady:
			c.state = csClosing
			frame := ws.AppendMaskedFrame(fr[:0], ws.OpClose, true, ws.AppendClosePayload(nil, ws.CloseNormal, ""), l.maskKey())
			if l.write(c, frame) {
				st.open++
			}
		case csConnecting, csHandshake, csJoining:
			l.closeFD(c)
		}
	}
	l.checkClosed()
}

func (l *loop) checkClosed() {
	st := l.st
	if st.closing && st.open <= 0 {
		select {
		case <-st.closed:
		default:
			close(st.closed)
		}
	}
}

// finishStep returns the step's counts, latency, send lag and connect time
// histograms and forgets the step.
func (l *loop) finishStep() (c stepCounts, lat, lag, conn *hdrhistogram.Histogram, firstErr string) {
	l.publish()
	st := l.st
	for _, c := range st.clients {
		if c.fd >= 0 {
			l.closeFD(c)
		}
	}
	lat, lag, conn = newHist(), newHist(), newHist()
	lat.Merge(l.stepLat)
	lag.Merge(l.stepLag)
	conn.Merge(l.stepConn)
	l.flushRows(l.clock.now())
	l.st = nil
	l.aConnected.Store(0)
	return st.counts, lat, lag, conn, st.firstErr
}

// shutdown closes every socket and hands the last rows to the writer.
func (l *loop) shutdown() {
	if st := l.st; st != nil {
		for _, c := range st.clients {
			if c.fd >= 0 {
				l.closeFD(c)
			}
		}
	}
	l.rec.Submit(l.rows)
	l.rows = nil
	l.poller.Close()
	unix.Close(l.tfd)
}

// --- connecting --------------------------------------------------------

func (l *loop) connectDue(now int64) {
	st := l.st
	for st.next < len(st.clients) && st.inflight < maxInflight {
		due := st.connT0 + int64(float64(st.next)*st.connGap)
		if due > now {
			return
		}
		c := st.clients[st.next]
		st.next++
		st.inflight++
		c.state = csConnecting
		c.startUs, c.dueUs = now, due
		if err := l.connect(c); err != nil {
			l.fail(c, err.Error())
		}
	}
	l.checkSettled()
}

func (l *loop) connect(c *client) error {
	dst := l.tgt.addr
	family := unix.AF_INET
	if dst.Addr().Is6() && !dst.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
			return errors.New("out of file descriptors")
		}
		return fmt.Errorf("socket: %w", err)
	}
	c.fd = int32(fd)
	l.setFD(fd, c)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if c.src >= 0 {
		// Let connect() pick the port per destination, so each source
		// address offers its whole ephemeral range to each server.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(l.srcs[c.src], 0))); err != nil {
			return fmt.Errorf("bind %s: %w", l.srcs[c.src], err)
		}
	}
	if err := unix.Connect(fd, sockaddr(dst)); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		if errors.Is(err, unix.EADDRNOTAVAIL) {
			return errors.New("out of ephemeral ports")
		}
		return fmt.Errorf("connect: %w", err)
	}
	if err := l.poller.Add(fd, netpoll.Writable); err != nil {
		return err
	}
	return nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() || ap.Addr().Is4In6() {
		return &unix.SockaddrInet4{Addr: ap.Addr().Unmap().As4(), Port: int(ap.Port())}
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
}

func (l *loop) setFD(fd int, c *client) {
	if fd >= len(l.fds) {
		n := max(2*len(l.fds), fd+1, 1024)
		fds := make([]*client, n)
		copy(fds, l.fds)
		l.fds = fds
	}
	l.fds[fd] = c
}

func (l *loop) onConnected(c *client) {
	soerr, err := unix.GetsockoptInt(int(c.fd), unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && soerr != 0 {
		err = unix.Errno(soerr)
	}
	if err != nil {
		l.fail(c, "connect: "+err.Error())
		return
	}
	c.state = csHandshake
	c.key = ws.NewClientKey()
	path := l.tgt.path
	if l.st.plan.echo {
		l.wbuf = ws.AppendClientHandshake(l.wbuf[:0], l.tgt.host, path, c.key)
	} else {
		l.wbuf = ws.AppendClientHandshake(l.wbuf[:0], l.tgt.host, l.tgt.roomPath(l.st.plan.roomName(int(c.rooms[0].room))), c.key)
	}
	if err := l.poller.Mod(int(c.fd), netpoll.Readable); err != nil {
		l.fail(c, err.Error())
		return
	}
	l.write(c, l.wbuf)
}

// fail ends a client that never became ready.
func (l *loop) fail(c *client, reason string) {
	st := l.st
	if c.fd >= 0 {
		l.closeFD(c)
	}
	if c.state == csReady || c.state == csClosing || c.state == csClosed || c.state == csFailed {
		return
	}
	if c.state != csIdle {
		st.inflight--
	}
	c.state = csFailed
	c.key = ""
	st.unsettle--
	st.counts.ConnectErrors++
	if st.firstErr == "" {
		st.firstErr = reason
	}
	l.checkSettled()
}

func (l *loop) ready(c *client) {
	st := l.st
	c.state = csReady
	// Connect time counts from the instant the ramp made the connect due,
	// so connects held back by the in-flight cap count as slow too.
	record(l.stepConn, l.clock.now()-c.dueUs)
	st.inflight--
	st.unsettle--
	st.counts.Joined++
	l.aConnected.Add(1)
	l.checkSettled()
}

// lost handles a connection that ended without our close handshake.
func (l *loop) lost(c *client, why string) {
	switch c.state {
	case csClosing:
		l.closeFD(c)
	case csReady:
		l.closeFD(c)
		c.state = csClosed
		l.st.counts.Disconnects++
		if l.st.firstErr == "" {
			l.st.firstErr = why
		}
	default:
		l.fail(c, why)
	}
}

func (l *loop) closeFD(c *client) {
	if c.fd < 0 {
		return
	}
	fd := int(c.fd)
	unix.Close(fd)
	if fd < len(l.fds) {
		l.fds[fd] = nil
	}
	c.fd = -1
	if c.pend != nil {
		l.putBuf(c.pend)
	}
	c.pend, c.out, c.key = nil, nil, ""
	c.rd.Reset()
	switch c.state {
	case csClosing:
		c.state = csClosed
		l.st.open--
		l.aConnected.Add(-1)
		l.checkClosed()
	case csReady:
		c.state = csClosed
		l.aConnected.Add(-1)
	}
}

// --- I/O ---------------------------------------------------------------

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
	if events&(netpoll.Readable|netpoll.Hangup) != 0 {
		l.onReadable(c)
	}
}

// write sends b or queues what the socket does not take. It reports false
// when the connection is gone.
func (l *loop) write(c *client, b []byte) bool {
	if c.fd < 0 {
		return false
	}
	if len(c.out) > 0 {
		c.out = append(c.out, b...)
		return true
	}
	n, err := unix.Write(int(c.fd), b)
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
	n, err := unix.Write(int(c.fd), c.out)
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
		n, err := unix.Read(int(c.fd), l.scratch[off:])
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
		n, err := ws.ParseServerHandshake(buf, c.key)
		if err != nil {
			l.fail(c, err.Error())
			return 0, 0, false
		}
		if n == 0 {
			return 0, 0, true
		}
		c.key = ""
		used = n
		if l.st.plan.echo {
			l.joinedRoom(c, &c.rooms[0], 0, now)
		} else {
			c.state = csJoining
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
		switch f.OpCode {
		case ws.OpText, ws.OpBinary:
			l.onMessage(c, f.Payload, now)
		case ws.OpPing:
			var fr [ws.MaxHeaderSize + ws.MaxControlPayload]byte
			l.write(c, ws.AppendMaskedFrame(fr[:0], ws.OpPong, true, f.Payload, l.maskKey()))
		case ws.OpClose:
			l.onClose(c, f.Payload)
			return used, 0, false
		}
		if c.fd < 0 {
			return used, 0, false
		}
	}
	return used, 0, true
}

func (l *loop) protocolError(c *client, code ws.StatusCode, why string) {
	var fr [ws.MaxHeaderSize + ws.MaxControlPayload]byte
	l.write(c, ws.AppendMaskedFrame(fr[:0], ws.OpClose, true, ws.AppendClosePayload(nil, code, ""), l.maskKey()))
	l.st.counts.Invalid++
	l.lost(c, "protocol error: "+why)
}

func (l *loop) onClose(c *client, payload []byte) {
	if c.state == csClosing {
		l.closeFD(c)
		return
	}
	code, _, _ := ws.ParseClosePayload(payload)
	var fr [ws.MaxHeaderSize + ws.MaxControlPayload]byte
	reply := ws.CloseNormal
	if code.ValidOnWire() {
		reply = code
	}
	l.write(c, ws.AppendMaskedFrame(fr[:0], ws.OpClose, true, ws.AppendClosePayload(nil, reply, ""), l.maskKey()))
	l.lost(c, "the server closed the connection with code "+strconv.Itoa(int(code)))
}

func (c *client) membership(room int) *membership {
	for i := range c.rooms {
		if int(c.rooms[i].room) == room {
			return &c.rooms[i]
		}
	}
	return nil
}

func (l *loop) onMessage(c *client, p []byte, now int64) {
	st := l.st
	f := &l.ff
	if !parseFields(p, f) {
		st.counts.Invalid++
		return
	}
	plan := st.plan
	if plan.echo {
		if !f.hasID || c.state != csReady && c.state != csClosing {
			st.counts.Invalid++
			return
		}
		l.delivered(c, int(c.rooms[0].room), f, now)
		return
	}
	if f.hasType {
		switch string(f.typ) {
		case "joined":
			r := plan.roomIndex(f.room)
			m := c.membership(r)
			if m == nil || m.joined {
				st.counts.Invalid++
				return
			}
			m.joinedSeq, m.lastSeq = f.seq, f.seq
			l.joinedRoom(c, m, r, now)
		case "error":
			if c.state == csJoining {
				l.fail(c, "the server refused a join: "+string(p))
				return
			}
			st.counts.ServerErrors++
			if st.firstErr == "" {
				st.firstErr = "server error frame: " + string(p)
			}
		}
		return
	}
	r := plan.roomIndex(f.room)
	m := c.membership(r)
	if m == nil || !m.joined {
		st.counts.Invalid++
		return
	}
	if f.hasSeq {
		if f.seq <= m.joinedSeq {
			st.counts.Replayed++ // history from before we joined: not a delivery of this run
			return
		}
		if f.seq <= m.lastSeq {
			st.counts.OutOfOrder++
		} else {
			m.lastSeq = f.seq
		}
	}
	if !f.hasID {
		st.counts.Invalid++
		return
	}
	l.delivered(c, r, f, now)
}

func (l *loop) delivered(c *client, room int, f *frameFields, now int64) {
	st := l.st
	sender := f.messageID >> 32
	st.counts.ReceivedAll++
	if st.plan.inShard(sender) {
		st.counts.Received++
	}
	if f.hasDue {
		record(l.lat, now-int64(f.dueUs))
	}
	l.rows = results.AppendEvent(l.rows, &results.Event{Step: st.name, Room: st.plan.roomName(room), Kind: results.Received,
		MessageID: f.messageID & 0xffffffff, SenderID: sender, ClientID: c.id, UnixUS: now, LagUS: -1})
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
	if c.nJoined == 1 && len(c.rooms) > 1 {
		l.wbuf = l.wbuf[:0]
		for _, m := range c.rooms[1:] {
			l.pbuf = append(l.pbuf[:0], `{"type":"join","room":"`...)
			l.pbuf = append(l.pbuf, st.plan.roomPre...)
			l.pbuf = strconv.AppendInt(l.pbuf, int64(m.room), 10)
			l.pbuf = append(l.pbuf, `"}`...)
			l.wbuf = ws.AppendMaskedFrame(l.wbuf, ws.OpText, true, l.pbuf, l.maskKey())
		}
		if !l.write(c, l.wbuf) {
			return
		}
	}
	if int(c.nJoined) == len(c.rooms) {
		l.ready(c)
	}
}

// --- sending -----------------------------------------------------------

func (l *loop) sendDue(now int64) {
	st := l.st
	for range maxSendsPerRun {
		c := st.order[st.cursor]
		due := st.t0 + c.phase + st.round*st.intervalUs
		if due >= st.endUs {
			st.sending = false
			return
		}
		if due > now {
			return
		}
		if c.state == csReady {
			l.sendMessage(c, due)
		}
		st.cursor++
		if st.cursor == len(st.order) {
			st.cursor = 0
			st.round++
		}
	}
}

func (l *loop) sendMessage(c *client, due int64) {
	st := l.st
	m := &c.rooms[c.rr]
	c.rr++
	if int(c.rr) == len(c.rooms) {
		c.rr = 0
	}
	c.counter++
	id := c.id<<32 | uint64(c.counter)
	p := l.pbuf[:0]
	if st.plan.echo {
		p = append(p, '{')
	} else {
		p = append(p, `{"room":"`...)
		p = append(p, st.plan.roomPre...)
		p = strconv.AppendInt(p, int64(m.room), 10)
		p = append(p, `",`...)
	}
	p = append(p, `"message_id":`...)
	p = strconv.AppendUint(p, id, 10)
	p = append(p, `,"due_us":`...)
	p = strconv.AppendInt(p, due, 10)
	p = append(p, `,"text":"`...)
	p = append(p, st.text...)
	p = append(p, `"}`...)
	l.pbuf = p
	l.wbuf = ws.AppendMaskedFrame(l.wbuf[:0], ws.OpText, true, p, l.maskKey())
	now := l.clock.now()
	if !l.write(c, l.wbuf) {
		return
	}
	lag := max(now-due, 0)
	record(l.lag, lag)
	st.counts.Sent++
	if st.plan.echo {
		st.counts.Expected++
	} else {
		st.counts.Expected += st.global[m.room]
	}
	l.rows = results.AppendEvent(l.rows, &results.Event{Step: st.name, Room: st.plan.roomName(int(m.room)), Kind: results.Sent,
		MessageID: uint64(c.counter), SenderID: c.id, ClientID: c.id, UnixUS: due, LagUS: lag})
	l.rowDone()
}

// rand is xorshift64*: masking keys and phases need speed, not secrecy.
func (l *loop) rand() uint64 {
	x := l.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	l.rng = x
	hi, _ := bits.Mul64(x, 0x2545F4914F6CDD1D)
	return x*0x2545F4914F6CDD1D ^ hi
}

func (l *loop) maskKey() [4]byte {
	v := l.rand()
	return [4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
}
