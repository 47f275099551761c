//go:build linux

package loadtest

import (
	"cmp"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/netpoll"
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
	// closeWaitUs bounds how long a client waits, once its closing
	// handshake is done, for the server to close TCP first (RFC 6455
	// section 7.1.1), and how long the end of a step waits for the answers
	// to its close frames.
	closeWaitUs = 2_000_000
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
	// lingerUs is set once the client's closing handshake is done (or its
	// close frame is out after a failure): its socket stays open until the
	// server closes TCP or until then (µs), see awaitServerClose.
	lingerUs int64
}

// gone reports whether c may send nothing more: its socket is closed, or it
// only waits for the server to close it.
func (c *client) gone() bool { return c.fd < 0 || c.lingerUs != 0 }

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

	counts stepCounts
	first  firstErrors
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
	RateLimited   int64 `json:"rate_limited"` // refusals for the rate limit (error code rate_limited, HTTP 429)
	Unavailable   int64 `json:"unavailable"`  // messages the server gave up (error code unavailable: its cluster could not take them)
	Replayed      int64 `json:"replayed"`
	OutOfOrder    int64 `json:"out_of_order"`
	Invalid       int64 `json:"invalid"`
	Unexpected    int64 `json:"unexpected"` // chat messages from senders or rooms this run did not create
	// The HTTP transport only.
	SendErrors  int64 `json:"send_errors,omitempty"`  // POSTs refused, failed or timed out
	PollErrors  int64 `json:"poll_errors,omitempty"`  // polls refused, failed or timed out
	HistoryGaps int64 `json:"history_gaps,omitempty"` // poll answers saying messages were no longer held
}

// firstErrors are a step's first reasons of two kinds, kept apart: an
// error frame refuses one message and leaves its connection open, so it
// must not pass for the cause of the connection failures beside it (a
// cluster past its capacity both refuses messages and drops clients).
type firstErrors struct {
	conn   string // a client failed to connect or join, was dropped, or (HTTP) a request failed
	server string // "server error: " and an error frame's text
}

// keep fills in what e still lacks from o: the first reason of each kind
// stays, whichever loop or part it came from.
func (e *firstErrors) keep(o firstErrors) {
	e.conn = cmp.Or(e.conn, o.conn)
	e.server = cmp.Or(e.server, o.server)
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
	a.RateLimited += b.RateLimited
	a.Unavailable += b.Unavailable
	a.Replayed += b.Replayed
	a.OutOfOrder += b.OutOfOrder
	a.Invalid += b.Invalid
	a.Unexpected += b.Unexpected
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
	lingering []*client // clients waiting for the server to close TCP (awaitServerClose)
	rng       uint64

	wire       wire        // the protocol the clients speak
	inb        []inbound   // what the frame being handled holds, reused
	extensions string      // offered in the upgrade request: permessage-deflate with --compression
	inflater   ws.Inflater // compressed messages: no context carries over, one serves every client
	inflated   []byte
	nextTick   int64
	// echoFrames sends every message back as it came, instead of reading
	// it as the wire's: the Autobahn fuzzingserver's cases (autobahn_test.go).
	echoFrames bool
	// socketClosed, when set, is told of every client whose socket closes
	// (autobahn_test.go waits for each case's connection with it).
	socketClosed func(*client)

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
	aConnected, aConnErr, aDisc, aSent, aRecv, aExpected, aUnexpected atomic.Int64
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
		scratch: make([]byte, scratchSize), wire: newWire(cfg),
		rng:  uint64(time.Now().UnixNano()) | 1 + uint64(id)<<1,
		done: make(chan struct{}),
		lat:  newHist(), lag: newHist(), stepLat: newHist(), stepLag: newHist(), stepConn: newHist(), pubLat: newHist(), pubLag: newHist(),
	}
	if cfg.Compression {
		l.extensions = ws.DeflateClientOffer
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
				_, _ = netpoll.Read(l.tfd, b[:])
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
				l.forceClose(c)
			}
			l.checkClosed()
		}
	}
	l.expireLingering(now)
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
		l.aUnexpected.Store(st.counts.Unexpected)
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
				l.goodbye(c)
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
			l.goodbye(c)
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
// histograms and first errors, and forgets the step.
func (l *loop) finishStep() (c stepCounts, lat, lag, conn *hdrhistogram.Histogram, first firstErrors) {
	l.publish()
	st := l.st
	for _, c := range st.clients {
		l.forceClose(c)
	}
	l.lingering = l.lingering[:0]
	lat, lag, conn = newHist(), newHist(), newHist()
	lat.Merge(l.stepLat)
	lag.Merge(l.stepLag)
	conn.Merge(l.stepConn)
	l.flushRows(l.clock.now())
	l.st = nil
	l.aConnected.Store(0)
	return st.counts, lat, lag, conn, st.first
}

// shutdown closes every socket and hands the last rows to the writer.
func (l *loop) shutdown() {
	if st := l.st; st != nil {
		for _, c := range st.clients {
			l.forceClose(c)
		}
	}
	l.rec.Submit(l.rows)
	l.rows = nil
	l.poller.Close()
	unix.Close(l.tfd)
}
