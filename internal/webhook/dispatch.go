package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	URL     string        // where events are POSTed
	Secret  []byte        // HMAC-SHA256 key of SignatureHeader
	Timeout time.Duration // of one request; 0: 5 s
	Batch   int           // events per request at most; 0: 100
	// MinBackoff and MaxBackoff bound the wait before a failed request is
	// sent again (doubling, with jitter); 0: 100 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// Client, when nil, is one with Timeout, keep-alive, no proxy from the
	// environment and no redirect followed (newClient).
	Client *http.Client
	// Send, when not nil, says which events go to the backend: the others
	// are committed unsent (counted as Filtered, not Dropped). The events
	// are decided whole and filtered here, so that what is left out (a
	// namespace's room events) does not change what the rest say.
	Send   func(Event) bool
	Logger *slog.Logger
}

// Dispatcher sends a Source's events to the backend in order: one request
// at a time, each retried with backoff until it gets a 2xx, and only then
// committed (at least once; the events' IDs let the backend drop a second
// copy).
type Dispatcher struct {
	cfg      DispatcherConfig
	src      Source
	sent     atomic.Uint64
	retried  atomic.Uint64
	failed   atomic.Uint64
	filtered atomic.Uint64
	fails    dropLog
	// batch is how many events the next request holds at most: Batch,
	// halved by each request that timed out, doubled back by each taken,
	// so that a backend slower than Timeout for Batch events still takes
	// fewer at a time and the events move on. Run's goroutine alone uses it.
	batch int
}

// NewDispatcher returns a dispatcher of src's events.
func NewDispatcher(src Source, cfg DispatcherConfig) *Dispatcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.MinBackoff)
	}
	if cfg.Client == nil {
		cfg.Client = newClient(cfg.Timeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{cfg: cfg, src: src, batch: cfg.Batch}
}

// Run sends events until ctx is done.
func (d *Dispatcher) Run(ctx context.Context) {
	for ctx.Err() == nil {
		evs, err := d.src.Next(ctx, d.batch)
		if err != nil {
			if ctx.Err() == nil {
				d.warn("webhook events could not be read: trying again", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		if out := d.keep(evs); len(out) > 0 {
			switch d.deliver(ctx, out) {
			case stopped:
				return
			case shrunk: // the same events again, fewer at a time
				continue
			}
		}
		if err := d.src.Commit(ctx, evs); err != nil && ctx.Err() == nil {
			// Another node sends them again: at least once.
			d.cfg.Logger.Info("webhook events sent but not committed", "events", len(evs), "err", err)
		}
	}
}

// keep returns the events of evs that Send lets through, in order.
func (d *Dispatcher) keep(evs []Event) []Event {
	if d.cfg.Send == nil {
		return evs
	}
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		if d.cfg.Send(e) {
			out = append(out, e)
		}
	}
	d.filtered.Add(uint64(len(evs) - len(out)))
	return out
}

// outcome is how deliver ended.
type outcome uint8

const (
	delivered outcome = iota // the backend took the events
	shrunk                   // a request timed out: fewer events at a time, from the same first one
	stopped                  // ctx ended
)

// deliver posts evs until the backend takes them. A request that timed out
// with more than one event halves the batch instead, after the backoff:
// the caller reads the same first events again, fewer of them.
func (d *Dispatcher) deliver(ctx context.Context, evs []Event) outcome {
	body, err := json.Marshal(Body{Events: evs})
	if err != nil { // cannot happen: events are plain data
		panic(fmt.Sprintf("webhook: encode events: %v", err))
	}
	wait := d.cfg.MinBackoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			d.retried.Add(1)
		}
		err := d.post(ctx, body)
		if err == nil {
			d.sent.Add(uint64(len(evs)))
			d.batch = min(2*d.batch, d.cfg.Batch)
			return delivered
		}
		if ctx.Err() != nil {
			return stopped
		}
		d.failed.Add(1)
		timedOut := isTimeout(err) && len(evs) > 1
		if timedOut {
			d.batch = max(1, min(d.batch, len(evs))/2)
		}
		d.warn("webhook request failed: sending it again", "url", d.cfg.URL, "err", err, "retry_in", wait, "batch", d.batch)
		if !sleep(ctx, wait/2+rand.N(wait/2+1)) {
			return stopped
		}
		if timedOut {
			return shrunk
		}
		wait = min(2*wait, d.cfg.MaxBackoff)
	}
}

// post sends body once, signed with the time it is sent: a retry an hour
// later is not refused as stale.
func (d *Dispatcher) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	ts := time.Now().Unix()
	req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	req.Header.Set(SignatureHeader, Sign(d.cfg.Secret, body, ts))
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection for the next one
	if err := resp.Body.Close(); err != nil {
		return fmt.Errorf("webhook answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if loc := resp.Header.Get("Location"); loc != "" {
			return fmt.Errorf("the backend answered %s, a redirect to %q (not followed: fix --webhook-url)", resp.Status, loc)
		}
		return errors.New("the backend answered " + resp.Status)
	}
	return nil
}

// isTimeout reports whether err is a request that ran out of time.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout()
}

// newClient returns the dispatcher's HTTP client. It follows no redirect:
// a 301 or 302 would turn the POST into a bodiless GET whose 2xx would mark
// the events delivered, a 307 would send them and their signature
// elsewhere; the 3xx is a failed request instead. It takes no proxy from
// the environment: the backend is the operator's own, as for the hooks.
func newClient(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	return &http.Client{Timeout: timeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Stats returns the dispatcher's counters and its source's.
func (d *Dispatcher) Stats() Stats {
	s := d.src.Stats()
	s.Sent, s.Retried, s.Failed, s.Filtered = d.sent.Load(), d.retried.Load(), d.failed.Load(), d.filtered.Load()
	return s
}

// warn logs at most once every ten seconds: a backend down for an hour
// costs a few hundred lines, not one per retry.
func (d *Dispatcher) warn(msg string, args ...any) {
	d.fails.mu.Lock()
	defer d.fails.mu.Unlock()
	if now := time.Now(); now.Sub(d.fails.last) >= 10*time.Second {
		d.cfg.Logger.Warn(msg, args...)
		d.fails.last = now
	}
}

// sleep waits for d or ctx; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
