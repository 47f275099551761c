//go:build linux

package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/scalechat/scalechat/internal/results"
	"golang.org/x/sys/unix"
)

// The HTTP transport (--transport poll): each client is a goroutine with its
// own net/http client (keep-alive, at most two connections: one for the poll
// in flight, one for a POST), which is how a polling client really behaves.
// A client "joins" with a first GET of its room (no since, no wait): the
// answer's seq marks the history to skip, like the joined frame of a
// WebSocket, and its arrival is the Joined row. It then polls with since =
// the greatest seq it saw: with wait (long polling), or without wait every
// --poll-interval (plain polling). It sends each message with a POST on the
// same open-loop schedule as the WebSocket clients. Failed requests (HTTP
// status, timeout, connection error) are counted, never fatal.

// maxPollBody bounds one poll answer.
const maxPollBody = 64 << 20

// pollStep is this process's share of one step over HTTP.
type pollStep struct {
	cfg   *Config
	tgt   pollTarget
	plan  *stepPlan
	name  string
	text  string
	clock *clock
	rec   *Recorder

	clients []*pollClient
	wg      sync.WaitGroup // every goroutine of the step

	pending atomic.Int64  // clients neither joined nor failed
	settled chan struct{} // closed when pending reaches 0
	senders atomic.Int64  // clients whose schedule is not over

	connected atomic.Int64 // clients joined and not closed

	mu               sync.Mutex // guards the fields below
	rows             []byte
	lastFlush        int64
	counts           stepCounts
	first            firstErrors             // conn only: an HTTP refusal is a failed request
	joined           []int64                 // per room
	pubLat, pubLag   *hdrhistogram.Histogram // since the collector last looked
	stepLat, stepLag *hdrhistogram.Histogram
	stepConn         *hdrhistogram.Histogram // from a client's due launch to its first poll's answer
	global           []int64
	sendCancel       context.CancelFunc
}

// pollClient is one simulated polling client.
type pollClient struct {
	s        *pollStep
	c        int
	id       uint64
	room     int
	roomName string
	http     *http.Client
	tr       *http.Transport

	joined bool  // guarded by s.mu
	dueUs  int64 // when its first poll was due by the ramp
	// Owned by the client's poll goroutine.
	joinedSeq, lastSeq uint64
	// Owned by the client's send goroutine.
	counter uint32
	phase   int64
}

// pollAnswer is the body of a GET /rooms/{room}/messages answer.
type pollAnswer struct {
	Room       string            `json:"room"`
	Seq        uint64            `json:"seq"`
	HistoryGap json.RawMessage   `json:"history_gap"`
	Messages   []json.RawMessage `json:"messages"`
}

func newPollStep(cfg *Config, tgt pollTarget, plan *stepPlan, clk *clock, rec *Recorder) *pollStep {
	s := plan.step
	ps := &pollStep{
		cfg: cfg, tgt: tgt, plan: plan, name: s.Name, clock: clk, rec: rec,
		text:    string(bytes.Repeat([]byte{'x'}, s.MsgSize)),
		settled: make(chan struct{}),
		joined:  make([]int64, plan.rooms()),
		pubLat:  newHist(), pubLag: newHist(), stepLat: newHist(), stepLag: newHist(), stepConn: newHist(),
		rows: rec.Buffer(),
	}
	for _, c := range plan.localClients() {
		var rooms [1]int32
		r := int(plan.clientRooms(c, rooms[:0])[0])
		pc := &pollClient{s: ps, c: c, id: plan.id(c), room: r, roomName: plan.roomName(r)}
		var src netip.Addr
		if len(cfg.SourceIPs) > 0 {
			src = cfg.SourceIPs[c%len(cfg.SourceIPs)]
		}
		pc.tr = newPollTransport(cfg.ConnectTimeout.D(), src)
		pc.http = &http.Client{Transport: pc.tr}
		ps.clients = append(ps.clients, pc)
	}
	ps.counts.Clients = int64(len(ps.clients))
	ps.pending.Store(int64(len(ps.clients)))
	if len(ps.clients) == 0 {
		close(ps.settled)
	}
	return ps
}

// newPollTransport is one client's HTTP connections: kept alive, at most
// two to the server, from src when it is valid.
func newPollTransport(dialTimeout time.Duration, src netip.Addr) *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout}
	if src.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
		// Let connect() pick the port per destination (as the WebSocket
		// clients do), so each source address offers its whole range.
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
			})
			return errors.Join(err, serr)
		}
	}
	return &http.Transport{
		DialContext:         d.DialContext,
		MaxConnsPerHost:     2,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// settle notes that n clients joined or failed.
func (s *pollStep) settle(n int64) {
	if s.pending.Add(-n) == 0 {
		close(s.settled)
	}
}

// launch starts the clients at ramp per second. Clients not started when
// ctx ends are given up: neither joined nor errors. pollCtx ends the
// clients' polling.
func (s *pollStep) launch(ctx, pollCtx context.Context, ramp float64) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		gap := 1e6 / ramp
		t0 := s.clock.now()
		for i, c := range s.clients {
			c.dueUs = t0 + int64(float64(i)*gap)
			if !s.sleepUntil(ctx, c.dueUs) {
				s.settle(int64(len(s.clients) - i))
				return
			}
			s.wg.Add(1)
			go c.run(pollCtx)
		}
	}()
}

// sleepUntil waits until the instant us (µs); false when ctx ended first.
func (s *pollStep) sleepUntil(ctx context.Context, us int64) bool {
	d := time.Duration(us-s.clock.now()) * time.Microsecond
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// noteErr counts one failed request (under s.mu).
func (s *pollStep) noteErr(counter *int64, what string, err error) {
	*counter++
	if s.first.conn == "" {
		s.first.conn = what + ": " + err.Error()
	}
}

// appendRowLocked adds a row and hands full chunks (and, each second,
// partial ones) to the writer. Called with s.mu held.
func (s *pollStep) appendRowLocked(room int, kind results.Kind, messageID, senderID, clientID uint64, unixUs, lag int64) {
	s.rows = results.AppendEvent(s.rows, &results.Event{Step: s.name, Room: s.plan.roomName(room), Kind: kind,
		MessageID: messageID, SenderID: senderID, ClientID: clientID, UnixUS: unixUs, LagUS: lag})
	now := s.clock.now()
	if len(s.rows) >= chunkSize || now-s.lastFlush >= 1_000_000 {
		s.flushLocked(now)
	}
}

func (s *pollStep) flushLocked(now int64) {
	s.rec.Submit(s.rows)
	s.rows = s.rec.Buffer()
	s.lastFlush = now
}

// run is a client's life: join, then poll until pollCtx ends.
func (c *pollClient) run(pollCtx context.Context) {
	s := c.s
	defer s.wg.Done()
	if !c.join(pollCtx) {
		return
	}
	defer s.connected.Add(-1)
	c.poll(pollCtx)
}

// join makes the first poll of the client's room; it reports whether the
// client joined.
func (c *pollClient) join(pollCtx context.Context) bool {
	s := c.s
	ctx, cancel := context.WithTimeout(pollCtx, s.cfg.ConnectTimeout.D())
	ans, err := c.get(ctx, s.tgt.roomURL(c.roomName, ""))
	cancel()
	now := s.clock.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.settle(1)
	if err != nil {
		if pollCtx.Err() != nil {
			return false // the step ended first: given up, not an error
		}
		s.noteErr(&s.counts.ConnectErrors, "first poll", err)
		return false
	}
	c.joinedSeq, c.lastSeq = ans.Seq, ans.Seq
	c.joined = true
	// As for WebSocket clients, connect time counts from the due instant.
	record(s.stepConn, now-c.dueUs)
	s.counts.Replayed += int64(len(ans.Messages))
	s.counts.Joined++
	s.joined[c.room]++
	s.connected.Add(1)
	s.appendRowLocked(c.room, results.Joined, 0, 0, c.id, now, -1)
	return true
}

// poll polls until pollCtx ends: long polls back to back, or plain polls
// every interval.
func (c *pollClient) poll(pollCtx context.Context) {
	s := c.s
	interval := s.cfg.PollInterval.D()
	wait := s.cfg.PollWait.D()
	timeout := s.cfg.ConnectTimeout.D()
	var waitArg string
	if interval == 0 {
		waitArg = "&wait=" + strconv.FormatInt(wait.Milliseconds(), 10) + "ms"
		timeout += wait
	}
	next := s.clock.now()
	for {
		if interval > 0 {
			next += int64(interval / time.Microsecond)
		}
		ctx, cancel := context.WithTimeout(pollCtx, timeout)
		ans, err := c.get(ctx, s.tgt.roomURL(c.roomName, "since="+strconv.FormatUint(c.lastSeq, 10)+waitArg))
		cancel()
		if pollCtx.Err() != nil {
			return // closing: an aborted poll is not an error
		}
		now := s.clock.now()
		if err != nil {
			s.mu.Lock()
			s.noteErr(&s.counts.PollErrors, "poll", err)
			s.mu.Unlock()
			// Back off a little so a failing server is not hammered.
			if interval == 0 {
				next = now + 100_000
			}
		} else {
			c.deliver(ans, now)
		}
		if interval == 0 && err == nil {
			continue
		}
		if next < now {
			next = now // late: poll at once, do not catch up
		}
		if !s.sleepUntil(pollCtx, next) {
			return
		}
	}
}

// deliver records the messages of a poll answer.
func (c *pollClient) deliver(ans *pollAnswer, now int64) {
	s := c.s
	var f frameFields
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ans.HistoryGap) > 0 && string(ans.HistoryGap) != "null" {
		s.counts.HistoryGaps++
	}
	for _, m := range ans.Messages {
		if !parseFields(m, &f) || f.hasType || string(f.room) != c.roomName || !f.hasSeq {
			s.counts.Invalid++
			continue
		}
		if f.seq <= c.joinedSeq {
			s.counts.Replayed++
			continue
		}
		if f.seq <= c.lastSeq {
			s.counts.OutOfOrder++
		} else {
			c.lastSeq = f.seq
		}
		if !f.hasID {
			s.counts.Invalid++
			continue
		}
		sender := f.messageID >> 32
		s.counts.ReceivedAll++
		if s.plan.inShard(sender) {
			s.counts.Received++
		}
		if f.hasDue {
			d := now - int64(f.dueUs)
			record(s.pubLat, d)
			record(s.stepLat, d)
		}
		s.appendRowLocked(c.room, results.Received, f.messageID&0xffffffff, sender, c.id, now, -1)
	}
}

// get makes one poll request and decodes its answer.
func (c *pollClient) get(ctx context.Context, url string) (*pollAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, requestError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPollBody+1))
	if err != nil {
		return nil, requestError(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, body)
	}
	if len(body) > maxPollBody {
		return nil, errors.New("answer larger than 64 MiB")
	}
	var ans pollAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("invalid answer: %w", err)
	}
	return &ans, nil
}

// requestError says in a few words why a request failed.
func requestError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("timed out")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("timed out")
	}
	return err
}

// errRateLimited marks a POST the server refused with 429 Too Many Requests.
var errRateLimited = errors.New("rate limited")

func statusError(resp *http.Response, body []byte) error {
	if len(body) > 200 {
		body = body[:200]
	}
	return fmt.Errorf("HTTP %s: %s", resp.Status, bytes.TrimSpace(body))
}

// startSending runs every joined client's open-loop schedule from t0 (µs)
// until end.
func (s *pollStep) startSending(pollCtx context.Context, t0, end int64, interval time.Duration, global []int64) {
	sendCtx, cancel := context.WithCancel(pollCtx)
	s.mu.Lock()
	s.global = global
	s.sendCancel = cancel
	s.mu.Unlock()
	iv := int64(interval / time.Microsecond)
	rng := uint64(time.Now().UnixNano()) | 1
	for _, c := range s.clients {
		if !c.joinedOK() || !s.plan.sends(c.c) {
			continue
		}
		rng = rng*6364136223846793005 + 1442695040888963407
		c.phase = int64((rng >> 11) % uint64(iv))
		s.senders.Add(1)
		s.wg.Add(1)
		go c.send(sendCtx, pollCtx, t0, end, iv)
	}
}

// joinedOK reports whether the client joined. Read after the step settled.
func (c *pollClient) joinedOK() bool {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.joined
}

// stopSending ends every schedule now (Ctrl+C).
func (s *pollStep) stopSending() {
	s.mu.Lock()
	cancel := s.sendCancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// send posts the client's messages at their due instants.
func (c *pollClient) send(sendCtx, pollCtx context.Context, t0, end, interval int64) {
	s := c.s
	defer s.wg.Done()
	defer s.senders.Add(-1)
	for round := int64(0); ; round++ {
		due := t0 + c.phase + round*interval
		if due >= end || !s.sleepUntil(sendCtx, due) {
			return
		}
		c.post(pollCtx, due)
	}
}

// post sends one message. It counts as sent once the request is made, so
// a refused or timed-out POST shows as a loss as well as an error.
func (c *pollClient) post(pollCtx context.Context, due int64) {
	s := c.s
	c.counter++
	id := c.id<<32 | uint64(c.counter)
	b := make([]byte, 0, 96+len(s.text))
	b = append(b, `{"room":"`...)
	b = append(b, c.roomName...)
	b = append(b, `","message_id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"due_us":`...)
	b = strconv.AppendInt(b, due, 10)
	b = append(b, `,"text":"`...)
	b = append(b, s.text...)
	b = append(b, `"}`...)
	lag := max(s.clock.now()-due, 0)
	s.mu.Lock()
	record(s.pubLag, lag)
	record(s.stepLag, lag)
	s.counts.Sent++
	s.counts.Expected += s.global[c.room]
	s.appendRowLocked(c.room, results.Sent, uint64(c.counter), c.id, c.id, due, lag)
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(pollCtx, s.cfg.ConnectTimeout.D())
	defer cancel()
	err := c.postBody(ctx, b)
	if err != nil && pollCtx.Err() == nil {
		s.mu.Lock()
		s.noteErr(&s.counts.SendErrors, "POST", err)
		if errors.Is(err, errRateLimited) {
			s.counts.RateLimited++
		}
		s.mu.Unlock()
	}
}

func (c *pollClient) postBody(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.s.tgt.roomURL(c.roomName, ""), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return requestError(err)
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return requestError(err)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return fmt.Errorf("%w: %w", errRateLimited, statusError(resp, ans))
	}
	if resp.StatusCode != http.StatusAccepted {
		return statusError(resp, ans)
	}
	return nil
}

// allDelivered reports whether sending is over and everything expected
// has arrived.
func (s *pollStep) allDelivered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.senders.Load() == 0 && s.counts.Received >= s.counts.Expected
}

// close ends every client and waits for them; cancel is pollCtx's.
func (s *pollStep) close(cancel context.CancelFunc) {
	cancel()
	s.wg.Wait()
	for _, c := range s.clients {
		c.tr.CloseIdleConnections()
	}
}

// finish returns the step's counts, latency, send lag and connect time histograms and first errors, and
// hands the last rows to the writer. Called after close.
func (s *pollStep) finish() (c stepCounts, lat, lag, conn *hdrhistogram.Histogram, first firstErrors) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(s.clock.now())
	lat, lag, conn = newHist(), newHist(), newHist()
	lat.Merge(s.stepLat)
	lag.Merge(s.stepLag)
	conn.Merge(s.stepConn)
	return s.counts, lat, lag, conn, s.first
}

// snapshot adds the step's progress to snap and its latencies since the
// last call to lat and lag.
func (s *pollStep) snapshot(snap *Snapshot, lat, lag *hdrhistogram.Histogram) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap.Connected += s.connected.Load()
	snap.ConnectErrors += s.counts.ConnectErrors
	snap.Disconnects += s.counts.PollErrors + s.counts.SendErrors
	snap.Sent += s.counts.Sent
	snap.Received += s.counts.Received
	snap.Expected += s.counts.Expected
	lat.Merge(s.pubLat)
	lag.Merge(s.pubLag)
	s.pubLat.Reset()
	s.pubLag.Reset()
}
