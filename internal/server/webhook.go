//go:build linux

package server

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/namespace"
	"github.com/scalechat/scalechat/internal/webhook"
)

// WebhookConfig turns webhooks on: the events of rooms and users, POSTed to
// URL once per cluster, in order, signed (docs/hooks.md, "Webhooks").
type WebhookConfig struct {
	URL    string // where events are POSTed; empty: no webhooks
	Secret string // HMAC-SHA256 key of each request's X-Scalechat-Signature
	// Publish sends a message_published event for every message of the
	// rooms whose namespace has no webhooks key; PublishRoom, when not nil,
	// decides per room instead (nil: the server sets it from Publish and
	// the namespaces). A room resolves it once, when it is made. The event
	// costs a copy of each message of those rooms.
	Publish     bool
	PublishRoom func(room string) bool
	Timeout     time.Duration // of one request; 0: 5 s
	// Queue is how many events wait on a single node (or changes wait on a
	// cluster node while Redis or NATS is unreachable) before new ones are
	// dropped, counted and logged; 0: 100000.
	Queue int
	// QueueBytes bounds the same queue in bytes (what the events hold,
	// messages included); 0: webhook.DefaultQueueBytes.
	QueueBytes int64
}

// publishByNamespace is the default PublishRoom: a room's namespace lists
// message_published, or has no webhooks key and Publish is on.
func publishByNamespace(ns namespace.Set, publish bool) func(string) bool {
	return func(room string) bool {
		o, ok := ns.Lookup(room)
		return ok && o.HasWebhook(webhook.MessagePublished, publish)
	}
}

// roomEvents returns the dispatcher's filter of room events (occupied,
// vacated, member joined and left): a room whose namespace has a webhooks
// key sends those it lists. It returns nil, no filter, when no namespace
// has the key. Events are filtered as they are sent, not as they are
// decided: the tracker still sees every join and leave, so a user's
// online and offline stay true, and a filtered event is not a drop.
func roomEvents(ns namespace.Set) func(webhook.Event) bool {
	if !slices.ContainsFunc(slices.Collect(maps.Values(ns)), func(o *namespace.Options) bool { return o.WebhooksSet }) {
		return nil
	}
	return func(e webhook.Event) bool {
		switch e.Name {
		case webhook.RoomOccupied, webhook.RoomVacated, webhook.MemberJoined, webhook.MemberLeft:
			// A namespace another node knows and this one does not
			// (configurations out of step) sends what it sends by default.
			o, ok := ns.Lookup(e.Room)
			return !ok || o.HasWebhook(e.Name, true)
		}
		return true
	}
}

// webhooks are a node's: where its changes are decided (a Memory on a
// single node, the Redis or NATS state in a cluster) and the dispatcher
// that sends them while this node is the cluster's.
type webhooks struct {
	cfg     WebhookConfig
	tracker webhook.Tracker
	run     func(context.Context) // the cluster tracker's work; nil on a single node
	disp    *webhook.Dispatcher
}

// newWebhooks returns the node's webhooks, or nil when they are off.
func newWebhooks(cfg Config) (*webhooks, error) {
	wc := cfg.Webhook
	if wc.URL == "" {
		return nil, nil
	}
	if wc.Queue <= 0 {
		wc.Queue = 100000
	}
	if wc.PublishRoom == nil {
		wc.PublishRoom = publishByNamespace(cfg.Namespaces, wc.Publish)
	}
	w := &webhooks{cfg: wc}
	var src webhook.Source
	switch {
	case cfg.NATS.URL != "": // never a Memory, which would send every event once per node
		nc := cfg.NATS // the connection's settings, as the broker's
		nc.Logger = cfg.Logger
		n, err := webhook.NewNATS(webhook.NATSConfig{NATS: nc, MaxPending: wc.Queue, MaxPendingBytes: wc.QueueBytes,
			MaxStream: wc.Queue, MaxStreamBytes: wc.QueueBytes, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		w.tracker, w.run, src = n, n.Run, n
	case cfg.Redis != "":
		r, err := webhook.NewRedis(webhook.RedisConfig{URL: cfg.Redis, MaxPending: wc.Queue, MaxPendingBytes: wc.QueueBytes,
			MaxStream: wc.Queue, MaxStreamBytes: wc.QueueBytes, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		w.tracker, w.run, src = r, r.Run, r
	default:
		m := webhook.NewMemory(broker.NewEpoch(), wc.Queue, wc.QueueBytes, cfg.Logger)
		w.tracker, src = m, m
	}
	w.disp = webhook.NewDispatcher(src, webhook.DispatcherConfig{URL: wc.URL, Secret: []byte(wc.Secret), Timeout: wc.Timeout,
		Send: roomEvents(cfg.Namespaces), Logger: cfg.Logger})
	return w, nil
}

// serve runs the webhooks until ctx is done. On a single node it first
// gives the dispatcher up to drain to send what is queued, while no request
// fails: a backend that is down does not hold the node's stop.
func (w *webhooks) serve(ctx context.Context, drain time.Duration) {
	var wg sync.WaitGroup
	dctx, stop := context.WithCancel(context.Background())
	wg.Go(func() { w.disp.Run(dctx) })
	if w.run != nil {
		wg.Go(func() { w.run(ctx) })
	}
	<-ctx.Done()
	if w.run == nil { // a single node's queue dies with it: send it first, unless the backend fails
		deadline, failed := time.Now().Add(drain), w.disp.Stats().Failed
		for st := w.disp.Stats(); st.Queued > 0 && st.Failed == failed && time.Now().Before(deadline); st = w.disp.Stats() {
			time.Sleep(10 * time.Millisecond) // the dispatcher signals nothing; bounded by drain
		}
	}
	stop()
	wg.Wait()
}

// WebhookStats returns the node's webhook counters, and whether webhooks
// are on.
func (s *Server) WebhookStats() (webhook.Stats, bool) {
	if s.webhooks == nil {
		return webhook.Stats{}, false
	}
	return s.webhooks.disp.Stats(), true
}
