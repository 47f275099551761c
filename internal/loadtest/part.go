//go:build linux

package loadtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// Phases of a step, as shown in the progress line.
const (
	phaseConnecting = "connecting"
	phaseSending    = "sending"
	phaseHolding    = "holding"
	phaseDraining   = "draining"
	phaseClosing    = "closing"
	phasePause      = "pause"
	phaseDone       = "done"
)

// coordinator connects a part (the clients one process runs) with whoever
// aggregates the run: the same process, or the parent of a worker.
type coordinator interface {
	// ready reports that the part's clients of step k have settled (joined
	// holds its joins per room) and returns when sending starts (µs) and the
	// joins per room of the whole run (or shard).
	ready(ctx context.Context, k int, joined []int64) (t0 int64, global []int64, err error)
	// progress receives a snapshot once a second.
	progress(s Snapshot)
	// stepDone receives the part's result of a step.
	stepDone(r PartStep)
}

// Snapshot is a part's progress at one instant.
type Snapshot struct {
	Step          string  `json:"step"`
	Phase         string  `json:"phase"`
	Elapsed       float64 `json:"elapsed"`   // seconds in the phase
	PhaseLen      float64 `json:"phase_len"` // planned seconds of the phase, 0 if open
	Target        int64   `json:"target"`
	Connected     int64   `json:"connected"`
	ConnectErrors int64   `json:"connect_errors"`
	Disconnects   int64   `json:"disconnects"`
	Sent          int64   `json:"sent"`
	Received      int64   `json:"received"`
	Expected      int64   `json:"expected"`
	Unexpected    int64   `json:"unexpected"`
	Interval      float64 `json:"interval"`    // seconds since the previous snapshot
	CPUSeconds    float64 `json:"cpu_seconds"` // used in that interval
	Cores         int     `json:"cores"`
	Lat           []byte  `json:"lat,omitempty"` // HDR histograms of that interval, encoded
	Lag           []byte  `json:"lag,omitempty"`
}

// PartStep is one part's result of one step.
type PartStep struct {
	Index       int        `json:"index"`
	Name        string     `json:"name"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     time.Time  `json:"ended_at"`
	Counts      stepCounts `json:"counts"`
	FirstError  string     `json:"first_error,omitempty"` // why a client first failed to connect or join, or was dropped (HTTP: a request failed)
	Interrupted bool       `json:"interrupted"`
	Lat         []byte     `json:"lat"`
	Lag         []byte     `json:"lag"`
	Conn        []byte     `json:"conn"` // connect times
	// The sending (or holding) phase: from the first due send to the end
	// of the drain. Zero when the step never got there.
	SendStart time.Time `json:"send_start"`
	SendEnd   time.Time `json:"send_end"`

	// FirstServerError is the first error frame the server sent: a refusal
	// of one message, which leaves its connection open, so it is kept
	// apart from FirstError.
	FirstServerError string `json:"first_server_error,omitempty"`
}

// first returns the part's first errors.
func (r *PartStep) first() firstErrors {
	return firstErrors{conn: r.FirstError, server: r.FirstServerError}
}

// setFirst records e as the part's first errors.
func (r *PartStep) setFirst(e firstErrors) {
	r.FirstError, r.FirstServerError = e.conn, e.server
}

func encodeHist(h *hdrhistogram.Histogram) []byte {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil
	}
	return b
}

func decodeInto(dst *hdrhistogram.Histogram, b []byte) {
	if len(b) == 0 {
		return
	}
	if h, err := hdrhistogram.Decode(b); err == nil {
		dst.Merge(h)
	}
}

// part runs one process's clients.
type part struct {
	cfg   *Config
	coord coordinator
	clock *clock
	rec   *Recorder
	loops []*loop // WebSocket transport
	tgt   target
	ptgt  pollTarget // HTTP transport

	pollMu sync.Mutex
	poll   *pollStep // the HTTP transport's current step

	mu         sync.Mutex // guards the fields below, read by the collector
	step       string
	phase      string
	phaseStart time.Time
	phaseLen   time.Duration
	target     int64
}

func (p *part) setPhase(step, phase string, length time.Duration) {
	p.mu.Lock()
	p.step, p.phase, p.phaseStart, p.phaseLen = step, phase, time.Now(), length
	p.mu.Unlock()
}

// runPart runs every step of cfg for this process's clients and records
// them to path. ctx ends the run gracefully (stop sending, drain, close);
// hard ends it at once. Both still leave a CSV of whole rows.
func runPart(ctx, hard context.Context, cfg *Config, coord coordinator, path string) (err error) {
	p := &part{cfg: cfg, coord: coord, clock: newClock()}
	loops := cfg.Loops
	if cfg.Transport == TransportPoll {
		if p.ptgt, err = parsePollTarget(cfg.URL); err != nil {
			return err
		}
		loops = 0 // polling clients are goroutines, not event loop clients
	} else if p.tgt, err = parseTarget(cfg.URL); err != nil {
		return err
	}
	if cfg.NoCSV {
		path = ""
	}
	rec, err := CreateRecorder(path)
	if err != nil {
		return err
	}
	p.rec = rec
	tgt := p.tgt
	for i := range loops {
		l, err := newLoop(i, cfg, tgt, p.clock, rec)
		if err != nil {
			p.stopLoops()
			rec.Close()
			return err
		}
		p.loops = append(p.loops, l)
		go l.run()
	}
	collectDone := make(chan struct{})
	stopCollect := make(chan struct{})
	go func() {
		defer close(collectDone)
		p.collect(stopCollect)
	}()
	hardDone := make(chan struct{})
	go func() {
		defer close(hardDone)
		select {
		case <-hard.Done():
			p.stopLoops()
		case <-stopCollect:
		}
	}()
	defer func() {
		close(stopCollect)
		<-collectDone
		<-hardDone
		p.stopLoops()
		if cerr := rec.Close(); err == nil {
			err = cerr
		}
	}()

	var idOffset uint64
	for k, s := range cfg.Steps {
		if ctx.Err() != nil || hard.Err() != nil {
			break
		}
		if k > 0 && cfg.Pause > 0 {
			// The line names the next step from now on: its target too.
			p.mu.Lock()
			p.target = int64(localCount(s.Clients(), cfg.Part(), cfg.Parts()))
			p.mu.Unlock()
			p.setPhase(s.Name, phasePause, cfg.Pause.D())
			select {
			case <-time.After(cfg.Pause.D()):
			case <-ctx.Done():
				return nil
			case <-hard.Done():
				return nil
			}
		}
		r, err := p.runStep(ctx, hard, k, idOffset)
		if r != nil {
			coord.stepDone(*r)
		}
		if err != nil {
			return err
		}
		idOffset += uint64(s.Clients())
	}
	p.setPhase("", phaseDone, 0)
	for _, l := range p.loops {
		if l.err != nil {
			return fmt.Errorf("event loop: %w", l.err)
		}
	}
	return nil
}

func (p *part) stopLoops() {
	for _, l := range p.loops {
		l.do(func() { l.quit = true })
	}
	for _, l := range p.loops {
		<-l.done
	}
}

// waitAll waits for one channel per loop, or a stopped loop, or cancel.
func waitAll(chs []chan struct{}, loops []*loop, ctx context.Context) bool {
	for i, ch := range chs {
		select {
		case <-ch:
		case <-loops[i].done:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (p *part) runStep(ctx, hard context.Context, k int, idOffset uint64) (*PartStep, error) {
	if p.cfg.Transport == TransportPoll {
		return p.runPollStep(ctx, hard, k, idOffset), nil
	}
	s := p.cfg.Steps[k]
	plan := newStepPlan(p.cfg, k, idOffset)
	res := &PartStep{Index: k, Name: s.Name, StartedAt: time.Now()}
	steps := p.planLoops(plan, s)

	// Connect and join.
	p.setPhase(s.Name, phaseConnecting, 0)
	ramp := s.Ramp / float64(p.cfg.Parts()) / float64(len(p.loops))
	for i, l := range p.loops {
		ls := steps[i]
		l.call(func() { l.beginStep(ls, ramp) })
	}
	settled := make([]chan struct{}, len(steps))
	for i, ls := range steps {
		settled[i] = ls.settled
	}
	either, cancelEither := anyDone(ctx, hard)
	stopped := !waitAll(settled, p.loops, either)
	cancelEither()
	if stopped {
		for _, l := range p.loops {
			l.call(l.abortConnects)
		}
		res.Interrupted = true
	}

	// Barrier: start sending when every client of the run has joined.
	if !stopped {
		joined := make([]int64, plan.rooms())
		for i, l := range p.loops {
			ls := steps[i]
			l.call(func() {
				for r, n := range ls.joined {
					joined[r] += n
				}
			})
		}
		t0, global, err := p.coord.ready(ctx, k, joined)
		if err != nil {
			res.Interrupted = true
		} else {
			p.sendPhase(ctx, hard, nil, s, t0, global, res)
		}
	}

	// Close with 1000 and wait for the answers.
	if hard.Err() == nil {
		p.setPhase(s.Name, phaseClosing, 0)
		deadline := p.clock.now() + closeWaitUs
		closed := make([]chan struct{}, len(steps))
		for i, l := range p.loops {
			ls := steps[i]
			l.call(func() { l.closeAll(deadline) })
			closed[i] = ls.closed
		}
		waitAll(closed, p.loops, hard)
	}
	if hard.Err() != nil {
		res.Interrupted = true
	}
	p.gather(steps, res)
	res.EndedAt = time.Now()
	return res, nil
}

// planLoops deals this part's clients of a step out to the event loops,
// round robin.
func (p *part) planLoops(plan *stepPlan, s Step) []*loopStep {
	local := plan.localClients()
	steps := make([]*loopStep, len(p.loops))
	text := strings.Repeat("x", s.MsgSize)
	for i := range steps {
		steps[i] = &loopStep{plan: plan, name: s.Name, text: text}
	}
	var rooms []int32
	for i, c := range local {
		rooms = plan.clientRooms(c, rooms[:0])
		cl := &client{fd: -1, c: int32(c), id: plan.id(c), src: -1, rooms: make([]membership, len(rooms))}
		for j, r := range rooms {
			cl.rooms[j].room = r
		}
		if len(p.cfg.SourceIPs) > 0 {
			cl.src = int32(c % len(p.cfg.SourceIPs))
		}
		ls := steps[i%len(steps)]
		ls.clients = append(ls.clients, cl)
	}
	p.mu.Lock()
	p.target = int64(len(local))
	p.mu.Unlock()
	return steps
}

// gather adds up the loops' counts and histograms of a step into res.
func (p *part) gather(steps []*loopStep, res *PartStep) {
	lat, lag, conn := newHist(), newHist(), newHist()
	var first firstErrors
	for i, l := range p.loops {
		ls := steps[i]
		var c stepCounts
		var fe firstErrors
		var ll, lg, cn *hdrhistogram.Histogram
		l.call(func() {
			if l.st == ls {
				c, ll, lg, cn, fe = l.finishStep()
			} else {
				c, ll, lg, cn, fe = ls.counts, newHist(), newHist(), newHist(), ls.first
			}
		})
		res.Counts.add(c)
		lat.Merge(ll)
		lag.Merge(lg)
		conn.Merge(cn)
		first.keep(fe)
	}
	res.setFirst(first)
	res.Lat, res.Lag, res.Conn = encodeHist(lat), encodeHist(lag), encodeHist(conn)
}

// sendPhase runs the schedule from t0 for the step's duration, then drains.
// pollCtx is the HTTP transport's clients' context (nil for WebSocket).
func (p *part) sendPhase(ctx, hard, pollCtx context.Context, s Step, t0 int64, global []int64, res *PartStep) {
	dur := s.Duration.D()
	end := t0 + int64(dur/time.Microsecond)
	res.SendStart = p.clock.time(t0)
	defer func() { res.SendEnd = time.Now() }()
	if s.MsgFrequency == 0 {
		p.setPhase(s.Name, phaseHolding, dur)
	} else {
		p.setPhase(s.Name, phaseSending, dur)
		for _, l := range p.loops {
			l.call(func() { l.startSending(t0, end, s.MsgFrequency.D(), global) })
		}
		if ps := p.pollStep(); ps != nil {
			ps.startSending(pollCtx, t0, end, s.MsgFrequency.D(), global)
		}
	}
	wait := time.Until(p.clock.time(end))
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		res.Interrupted = true
		for _, l := range p.loops {
			l.call(l.stopSending)
		}
		if ps := p.pollStep(); ps != nil {
			ps.stopSending()
		}
	case <-hard.Done():
		return
	}
	if s.MsgFrequency == 0 {
		return
	}
	// Drain: wait for messages in flight. Only one process that sees the
	// whole run knows when everything expected has arrived: a shard counts
	// what its own senders owe but receives what every shard sent, so it
	// drains for the whole period (else the other shards' last messages
	// arrive after it closed, and the merged files lose them).
	p.setPhase(s.Name, phaseDraining, s.Drain.D())
	deadline := time.After(s.Drain.D())
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-deadline:
			return
		case <-hard.Done():
			return
		case <-poll.C:
			if p.cfg.Parts() == 1 && p.allDelivered() {
				return
			}
		}
	}
}

func (p *part) allDelivered() bool {
	if ps := p.pollStep(); ps != nil {
		return ps.allDelivered()
	}
	var exp, recv int64
	busy := false
	for _, l := range p.loops {
		l.call(func() {
			if st := l.st; st != nil {
				exp += st.counts.Expected
				recv += st.counts.Received
				busy = busy || st.sending
			}
		})
	}
	return !busy && recv >= exp
}

// pollStep returns the HTTP transport's current step, or nil.
func (p *part) pollStep() *pollStep {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	return p.poll
}

// runPollStep is runStep for the HTTP transport: connect (first poll),
// barrier, send, drain, close.
func (p *part) runPollStep(ctx, hard context.Context, k int, idOffset uint64) *PartStep {
	cfg := p.cfg
	s := cfg.Steps[k]
	plan := newStepPlan(cfg, k, idOffset)
	res := &PartStep{Index: k, Name: s.Name, StartedAt: time.Now()}
	ps := newPollStep(cfg, p.ptgt, plan, p.clock, p.rec)
	p.mu.Lock()
	p.target = int64(len(ps.clients))
	p.mu.Unlock()
	p.pollMu.Lock()
	p.poll = ps
	p.pollMu.Unlock()

	// The clients' requests end at close, or at once on a hard stop.
	pollCtx, closePolls := context.WithCancel(hard)
	defer closePolls()

	p.setPhase(s.Name, phaseConnecting, 0)
	either, cancelEither := anyDone(ctx, hard)
	ps.launch(either, pollCtx, s.Ramp/float64(cfg.Parts()))
	select {
	case <-ps.settled:
	case <-either.Done():
	}
	stopped := either.Err() != nil
	cancelEither()
	if stopped {
		res.Interrupted = true
	} else {
		ps.mu.Lock()
		joined := append([]int64(nil), ps.joined...)
		ps.mu.Unlock()
		t0, global, err := p.coord.ready(ctx, k, joined)
		if err != nil {
			res.Interrupted = true
		} else {
			p.sendPhase(ctx, hard, pollCtx, s, t0, global, res)
		}
	}

	p.setPhase(s.Name, phaseClosing, 0)
	ps.close(closePolls)
	if hard.Err() != nil {
		res.Interrupted = true
	}
	c, lat, lag, conn, fe := ps.finish()
	res.Counts = c
	res.setFirst(fe)
	res.Lat, res.Lag, res.Conn = encodeHist(lat), encodeHist(lag), encodeHist(conn)
	res.EndedAt = time.Now()
	return res
}

// anyDone returns a context done when either is.
func anyDone(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

// collect sends a snapshot to the coordinator once a second.
func (p *part) collect(stop <-chan struct{}) {
	every := p.cfg.Progress
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	prevCPU := cpuSeconds()
	prev := time.Now()
	lat, lag := newHist(), newHist()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			cpu := cpuSeconds()
			var s Snapshot
			p.mu.Lock()
			s.Step, s.Phase, s.Target = p.step, p.phase, p.target
			s.Elapsed = now.Sub(p.phaseStart).Seconds()
			s.PhaseLen = p.phaseLen.Seconds()
			p.mu.Unlock()
			lat.Reset()
			lag.Reset()
			for _, l := range p.loops {
				s.Connected += l.aConnected.Load()
				s.ConnectErrors += l.aConnErr.Load()
				s.Disconnects += l.aDisc.Load()
				s.Sent += l.aSent.Load()
				s.Received += l.aRecv.Load()
				s.Expected += l.aExpected.Load()
				s.Unexpected += l.aUnexpected.Load()
				l.takePublished(lat, lag)
			}
			if ps := p.pollStep(); ps != nil {
				ps.snapshot(&s, lat, lag)
			}
			s.Interval = now.Sub(prev).Seconds()
			s.CPUSeconds = cpu - prevCPU
			s.Cores = processCores()
			s.Lat, s.Lag = encodeHist(lat), encodeHist(lag)
			prev, prevCPU = now, cpu
			p.coord.progress(s)
		}
	}
}

// cpuSeconds is the CPU time this process used so far.
func cpuSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func sortSlice[T any](s []T, less func(a, b T) bool) {
	slices.SortFunc(s, func(a, b T) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
}
