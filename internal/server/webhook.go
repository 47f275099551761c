//go:build linux

package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/webhook"
)

// WebhookConfig turns webhooks on: the events of rooms and users, POSTed to
// URL once per cluster, in order, signed (docs/hooks.md, "Webhooks").
type WebhookConfig struct {
	URL    string // where events are POSTed; empty: no webhooks
	Secret string // HMAC-SHA256 key of each request's X-Scalechat-Signature
	// Publish sends a message_published event for every message of every
	// room; PublishRoom, when not nil, decides per room instead (namespaces
	// select it). The event costs a copy of each message of those rooms.
	Publish     bool
	PublishRoom func(room string) bool
	Timeout     time.Duration // of one request; 0: 5 s
	// Queue is how many events wait on a single node (or changes wait on a
	// cluster node while Redis is unreachable) before new ones are dropped,
	// counted and logged; 0: 100000.
	Queue int
}

// publishes reports whether room's messages make message_published events.
func (c *WebhookConfig) publishes(room string) bool {
	if c.PublishRoom != nil {
		return c.PublishRoom(room)
	}
	return c.Publish
}

// webhooks are a node's: where its changes are decided (a Memory on a
// single node, the Redis state in a cluster) and the dispatcher that sends
// them while this node is the cluster's.
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
	w := &webhooks{cfg: wc}
	var src webhook.Source
	if cfg.Redis != "" {
		r, err := broker.NewRedisWebhooks(broker.RedisWebhooksConfig{URL: cfg.Redis, MaxPending: wc.Queue, MaxStream: wc.Queue, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		w.tracker, w.run, src = r, r.Run, r
	} else {
		m := webhook.NewMemory(broker.NewEpoch(), wc.Queue, cfg.Logger)
		w.tracker, src = m, m
	}
	w.disp = webhook.NewDispatcher(src, webhook.DispatcherConfig{URL: wc.URL, Secret: []byte(wc.Secret), Timeout: wc.Timeout, Logger: cfg.Logger})
	return w, nil
}

// tap returns b with the node's changes also told to the webhooks.
func (w *webhooks) tap(b broker.Broker) broker.Broker {
	t := &tappedBroker{Broker: b, wh: w}
	if d, ok := b.(broker.Directory); ok {
		return tappedDirectory{t, d}
	}
	return t
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

// tappedBroker is the node's broker with its presence changes and
// publishes also told to the webhooks.
type tappedBroker struct {
	broker.Broker
	wh *webhooks
}

// Presence implements broker.Broker.
func (b *tappedBroker) Presence(room, user string, count int) {
	b.Broker.Presence(room, user, count)
	b.wh.tracker.Presence(room, user, count)
}

// Publish implements broker.Broker: a message of a room whose publish
// webhook is on is told to the webhooks once it has its seq.
func (b *tappedBroker) Publish(p broker.Publication) error {
	if b.wh.cfg.publishes(p.Room) {
		p.Done = b.published(p)
	}
	return b.Broker.Publish(p)
}

// published returns p's Done, which also makes its message_published
// event. Done is called under the room's lock, in seq order: the tracker
// gets a room's messages in order.
func (b *tappedBroker) published(p broker.Publication) func(uint64) {
	room, prefix, suffix, done := p.Room, append([]byte(nil), p.Prefix...), append([]byte(nil), p.Suffix...), p.Done
	return func(seq uint64) {
		if seq > 0 {
			msg := strconv.AppendUint(prefix, seq, 10)
			b.wh.tracker.Published(room, seq, append(msg, suffix...))
		}
		if done != nil {
			done(seq)
		}
	}
}

// tappedDirectory is a tapped broker that also knows the cluster's rooms.
type tappedDirectory struct {
	*tappedBroker
	broker.Directory
}

// tapBroker returns the hub's broker maker (nil: a single node's Memory)
// with its broker tapped.
func (w *webhooks) tapBroker(mk func(broker.Handler) (broker.Broker, error)) func(broker.Handler) (broker.Broker, error) {
	return func(h broker.Handler) (broker.Broker, error) {
		if mk == nil {
			return w.tap(broker.NewMemory(h)), nil
		}
		b, err := mk(h)
		if err != nil {
			return nil, err
		}
		return w.tap(b), nil
	}
}

// WebhookStats returns the node's webhook counters, and whether webhooks
// are on.
func (s *Server) WebhookStats() (webhook.Stats, bool) {
	if s.webhooks == nil {
		return webhook.Stats{}, false
	}
	return s.webhooks.disp.Stats(), true
}
