//go:build linux

package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/scrape"
)

// maxSubscribers bounds the dashboards watching one node at once.
const maxSubscribers = 64

// Feed samples a set of nodes every interval, keeps the last samples of
// each, and streams them to dashboards as server-sent events.
//
// Every event is one JSON Update. The first one a dashboard receives holds
// the samples kept; each later one holds the newest sample of every node
// (none, and an error, for a node that could not be scraped).
type Feed struct {
	sources  []scrape.Source // written by sample under mu, read by sample freely
	fixed    int             // sources[:fixed] are always there; the rest are discovered
	discover func(context.Context) ([]scrape.Source, error)
	interval time.Duration
	keep     int // samples kept per node
	log      *slog.Logger

	mu    sync.Mutex
	nodes []nodeState
	subs  map[chan []byte]struct{}
}

type nodeState struct {
	prev    scrape.Snapshot
	hasPrev bool
	samples []Sample // oldest first, at most keep
	err     string
}

// Update is the JSON of one dashboard event.
type Update struct {
	IntervalMS int64        `json:"interval_ms"`
	Nodes      []NodeUpdate `json:"nodes"`
}

// NodeUpdate is one node's part of an Update.
type NodeUpdate struct {
	Node    string   `json:"node"`
	Error   string   `json:"error,omitempty"` // why the last scrape failed
	Samples []Sample `json:"samples"`
}

// NewFeed returns a feed of sources sampled every interval that keeps the
// samples of the last keep.
func NewFeed(sources []scrape.Source, interval, keep time.Duration, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed{
		sources:  sources,
		fixed:    len(sources),
		interval: interval,
		keep:     max(1, int(keep/interval)),
		log:      log,
		nodes:    make([]nodeState, len(sources)),
		subs:     make(map[chan []byte]struct{}),
	}
}

// Run samples the nodes every interval until ctx is done.
func (f *Feed) Run(ctx context.Context) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	f.sample(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.sample(ctx)
		}
	}
}

// Discover makes the feed ask discover, before each round, for the other
// nodes to sample besides its own sources (the nodes of a cluster). Nodes
// come and go with discover's answers; one with the name of a fixed source
// is skipped.
func (f *Feed) Discover(discover func(context.Context) ([]scrape.Source, error)) {
	f.discover = discover
}

// refresh sets the sources of this round from discover.
func (f *Feed) refresh(ctx context.Context) {
	if f.discover == nil {
		return
	}
	found, err := f.discover(ctx)
	if err != nil {
		f.log.Debug("dashboard cannot list the cluster's nodes", "err", err)
		return // keep the nodes known
	}
	sources := append([]scrape.Source(nil), f.sources[:f.fixed]...)
	seen := map[string]bool{}
	for _, s := range sources {
		seen[s.Node] = true
	}
	slices.SortFunc(found, func(a, b scrape.Source) int { return strings.Compare(a.Node, b.Node) })
	for _, s := range found {
		if !seen[s.Node] {
			seen[s.Node] = true
			sources = append(sources, s)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := map[string]nodeState{}
	for i, s := range f.sources {
		old[s.Node] = f.nodes[i]
	}
	f.nodes = make([]nodeState, len(sources))
	for i, s := range sources {
		f.nodes[i] = old[s.Node]
	}
	f.sources = sources
}

// sample scrapes every node at once and sends the newest samples to the
// dashboards.
func (f *Feed) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, f.interval)
	defer cancel()
	f.refresh(ctx)
	snaps := make([]scrape.Snapshot, len(f.sources))
	errs := make([]error, len(f.sources))
	var wg sync.WaitGroup
	for i, src := range f.sources {
		wg.Go(func() { snaps[i], errs[i] = src.Snapshot(ctx) })
	}
	wg.Wait()

	u := Update{IntervalMS: f.interval.Milliseconds(), Nodes: make([]NodeUpdate, len(f.sources))}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.sources {
		n := &f.nodes[i]
		u.Nodes[i] = NodeUpdate{Node: f.sources[i].Node, Samples: []Sample{}}
		if errs[i] != nil {
			if n.err == "" {
				f.log.Warn("dashboard cannot read a node's metrics", "node", f.sources[i].Node, "err", errs[i])
			}
			n.err = errs[i].Error()
			u.Nodes[i].Error = n.err
			continue
		}
		n.err = ""
		if n.hasPrev {
			s := SampleBetween(n.prev, snaps[i])
			if len(n.samples) == f.keep {
				copy(n.samples, n.samples[1:])
				n.samples = n.samples[:f.keep-1]
			}
			n.samples = append(n.samples, s)
			u.Nodes[i].Samples = append(u.Nodes[i].Samples, s)
		}
		n.prev, n.hasPrev = snaps[i], true
	}
	if len(f.subs) == 0 {
		return
	}
	b, err := json.Marshal(u)
	if err != nil {
		f.log.Error("encode dashboard update", "err", err)
		return
	}
	for ch := range f.subs {
		select {
		case ch <- b:
		default: // a dashboard that cannot keep up misses an update rather than holding up the others
		}
	}
}

// subscribe returns the samples kept, as an Update, and a channel of the
// later updates; ok is false when too many dashboards are watching.
func (f *Feed) subscribe() (first []byte, ch chan []byte, ok bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= maxSubscribers {
		return nil, nil, false, nil
	}
	u := Update{IntervalMS: f.interval.Milliseconds(), Nodes: make([]NodeUpdate, len(f.sources))}
	for i, n := range f.nodes {
		u.Nodes[i] = NodeUpdate{Node: f.sources[i].Node, Error: n.err, Samples: append([]Sample{}, n.samples...)}
	}
	first, err = json.Marshal(u)
	if err != nil {
		return nil, nil, false, err
	}
	ch = make(chan []byte, 4)
	f.subs[ch] = struct{}{}
	return first, ch, true, nil
}

func (f *Feed) unsubscribe(ch chan []byte) {
	f.mu.Lock()
	delete(f.subs, ch)
	f.mu.Unlock()
}

// ServeHTTP streams the feed as server-sent events until the client goes
// away or the request's context ends.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	first, ch, ok, err := f.subscribe()
	if err != nil {
		http.Error(w, "cannot encode the dashboard feed", http.StatusInternalServerError)
		return
	}
	if !ok {
		http.Error(w, "too many dashboards open on this node", http.StatusServiceUnavailable)
		return
	}
	defer f.unsubscribe(ch)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx would otherwise hold the stream back
	send := func(b []byte) bool {
		// A client that stops reading must not hold the handler forever.
		if err := rc.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := w.Write([]byte("data: ")); err != nil {
			return false
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		if _, err := w.Write([]byte("\n\n")); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(first) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-ch:
			if !send(b) {
				return
			}
		}
	}
}
