package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// natsBus is the NATS engine's node channels (docs/nats.md, step 4): the
// owner protocol's records a node sends another, a round's in one message
// on the other's core subject <prefix>.node.<id>.m, as the Redis engine's
// PUBLISH on scalechat:node:<id> (redis_nodechan.go). Every record goes
// out on one connection: NATS keeps the order of one connection's messages
// to one subscription, and the protocol needs a node's records in the
// order sent (a snapshot before the room's messages, a message before the
// answer to its forward).
//
// NATS core drops what a subscriber cannot take in time (a slow consumer)
// and says so only by an asynchronous error: lost is then called, and the
// engine treats it as a gap in every room it follows, as a lost node
// channel is on Redis.
type natsBus struct {
	nc     *nats.Conn
	prefix string
	sub    *nats.Subscription
	// dropped counts the slow-consumer errors of this node's subscription.
	dropped atomic.Uint64
}

// newNATSBus subscribes this node, id, to its subjects on nc,
// <prefix>.node.<id>.>, and calls deliver with each message other nodes
// (or the server) send there, in the order each sent them, on the
// subscription's delivery goroutine (one at a time): the rounds on
// <prefix>.node.<id>.m, and on the rest the answers to requests this node
// made as plain publishes with a reply subject under its own (the
// server's no responders, when nobody took them). The
// caller owns nc, and has its error handler call the bus's slowConsumer
// (nats.go has one handler a connection).
func newNATSBus(nc *nats.Conn, prefix, id string, deliver func(m *nats.Msg)) (*natsBus, error) {
	b := &natsBus{nc: nc, prefix: prefix}
	sub, err := nc.Subscribe(b.prefix+".node."+id+".>", func(m *nats.Msg) {
		deliver(m)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to this node's subject: %w", err)
	}
	if err := nc.Flush(); err != nil { // the subscription is the server's before anyone is told of this node
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to this node's subject: %w", err)
	}
	b.sub = sub
	return b, nil
}

// subject is node's subject for rounds.
func (b *natsBus) subject(node string) string { return b.prefix + ".node." + node + ".m" }

// replySubject is a subject under this node's, id's, for the answer to a
// request of kind sent as a plain publish: the server's no responders, or
// the responder's answer, arrives on the node's one subscription, in order
// with the rounds.
func (b *natsBus) replySubject(id, kind, tail string) string {
	return b.prefix + ".node." + id + "." + kind + "." + tail
}

// send queues payload, a round's records, for node. It goes out at the
// next flush of the connection (nats.go flushes on its own within a few
// milliseconds, or at flush).
func (b *natsBus) send(node string, payload []byte, reply string) error {
	if err := b.nc.PublishMsg(&nats.Msg{Subject: b.subject(node), Reply: reply, Data: payload}); err != nil {
		return fmt.Errorf("send to node %s: %w", node, err)
	}
	return nil
}

// natsFlushWait bounds a round's flush when its context has
// no deadline (nats.go requires one): a server that does not take a round
// within it is taken for unreachable, as a Redis round that timed out.
const natsFlushWait = 2 * time.Second

// withDeadline is ctx, bounded by d when it has no deadline of its own
// (nats.go refuses a context without one).
func withDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// flush sends what is queued and waits until the server has it: the end
// of a round.
func (b *natsBus) flush(ctx context.Context) error {
	ctx, cancel := withDeadline(ctx, natsFlushWait)
	defer cancel()
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("send a round to other nodes: %w", err)
	}
	return nil
}

// slowConsumer is the connection's error handler's part for the bus: when
// err is the server dropping this node's messages, it counts it, calls
// lost and reports true.
func (b *natsBus) slowConsumer(sub *nats.Subscription, err error, lost func()) bool {
	if sub != b.sub || !errors.Is(err, nats.ErrSlowConsumer) {
		return false
	}
	b.dropped.Add(1)
	lost()
	return true
}

// close unsubscribes this node: from then on a round sent to it is
// answered by the server with no responders.
func (b *natsBus) close() error {
	if err := b.sub.Unsubscribe(); err != nil {
		return fmt.Errorf("leave this node's subject: %w", err)
	}
	return b.nc.Flush()
}
