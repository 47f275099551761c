package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/scalechat/scalechat/internal/broker"
)

// The leases of the webhooks on NATS (nats.go has the design): each node's
// in <name>_whnodes, renewed every quarter lease with its incarnation, and
// the dispatcher's; the gone changes of nodes whose lease ended.

func (w *NATS) tickLoop(ctx context.Context) {
	t := time.NewTicker(w.lease / 4)
	defer t.Stop()
	for {
		w.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick renews the node's lease (a new incarnation and a resync when it
// ended), takes or keeps the dispatcher's lease, and, while this node
// holds it, appends the dead nodes' gone changes.
func (w *NATS) tick(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, w.lease/4)
	defer cancel()
	if err := w.renew(c); err != nil && ctx.Err() == nil {
		w.errs.warn(w.log, "webhook lease not renewed", "err", err)
	}
	w.checkEpoch(c)
	w.lead(c)
	w.reap(c)
}

// checkEpoch reads the cursor's epoch: a new one (the dispatcher started
// it, purging the stream) needs this node's whole state again, in a sync
// made after the read, so after the epoch's change in the stream.
func (w *NATS) checkEpoch(ctx context.Context) {
	e, err := w.counts.Get(ctx, natsCursorKey)
	if err != nil { // none yet (no dispatcher), or not known now
		return
	}
	var cur natsCursor
	if json.Unmarshal(e.Value(), &cur) != nil {
		return
	}
	w.mu.Lock()
	w.epoch = cur.Epoch
	again := cur.Epoch != w.synced && !w.resync
	if again {
		w.resync = true
	}
	w.mu.Unlock()
	if again {
		wake(w.wake)
	}
}

// renew renews the node's lease, or takes a new one when it ended (or
// there was none): a new incarnation, whose first message is a sync.
func (w *NATS) renew(ctx context.Context) error {
	w.mu.Lock()
	inc, rev := w.inc, w.leaseRev
	w.mu.Unlock()
	if rev != 0 {
		r, err := w.leases.Update(ctx, w.id, []byte(inc), rev)
		if err == nil {
			w.mu.Lock()
			w.leaseRev = r
			w.mu.Unlock()
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyNotFound) {
			if lostState(err) {
				_, _, _ = w.open(ctx)
			}
			return err
		}
		w.log.Info("this node's webhook lease ended: it sends its whole state again", "node", w.id)
	}
	inc = broker.NewEpoch()
	r, err := w.leases.Create(ctx, w.id, []byte(inc))
	if err != nil {
		if lostState(err) {
			_, _, _ = w.open(ctx)
		}
		w.mu.Lock()
		w.leaseRev = 0
		w.mu.Unlock()
		return err
	}
	w.mu.Lock()
	// Messages made for the last incarnation still go (their published
	// messages are events; their presence is ignored): the sync follows.
	w.inc, w.leaseRev, w.resync = inc, r, true
	w.mu.Unlock()
	wake(w.wake)
	return nil
}

// lead takes the dispatcher's lease when it is free, or renews it.
func (w *NATS) lead(ctx context.Context) {
	start := time.Now()
	w.lmu.Lock()
	rev := w.dispRev
	w.lmu.Unlock()
	var r uint64
	var err error
	if rev != 0 {
		r, err = w.leases.Update(ctx, natsDispatcherKey, []byte(w.id), rev)
	} else {
		r, err = w.leases.Create(ctx, natsDispatcherKey, []byte(w.id))
	}
	w.lmu.Lock()
	defer w.lmu.Unlock()
	if w.dispRev != rev { // let go meanwhile (Run stopping)
		return
	}
	switch {
	case err == nil:
		if rev == 0 {
			w.term++
			w.log.Info("this node is the cluster's webhook dispatcher", "node", w.id)
		}
		w.dispRev, w.until = r, start.Add(w.lease-natsLeaseMargin)
		wake(w.leadWake)
	case rev != 0 && (errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound)):
		w.log.Info("this node lost the webhook dispatcher's lease", "node", w.id)
		w.dispRev = 0
		w.term++
		wake(w.leadWake)
	}
}

// leading returns the dispatcher's term and whether this node leads now.
func (w *NATS) leading() (uint64, bool) {
	w.lmu.Lock()
	defer w.lmu.Unlock()
	return w.term, w.dispRev != 0 && time.Now().Before(w.until)
}

// reap appends a gone change for each node the dispatcher's tally holds
// whose lease key is gone or names another incarnation. The tally's nodes
// are read before the leases: a node's lease is made before its sync.
func (w *NATS) reap(ctx context.Context) {
	w.lmu.Lock()
	incs := w.incs
	leading := w.dispRev != 0 && time.Now().Before(w.until)
	w.lmu.Unlock()
	if !leading || len(incs) == 0 {
		return
	}
	live, err := w.liveNodes(ctx)
	if err != nil {
		w.errs.warn(w.log, "the webhook leases could not be read", "err", err)
		return
	}
	for node, inc := range incs {
		if live[node] == inc {
			continue
		}
		w.lmu.Lock()
		sent := w.goneSent[node+"/"+inc]
		w.lmu.Unlock()
		if sent {
			continue
		}
		if err := w.appendChange(ctx, &natsChange{Op: natsOpGone, Node: node, Inc: inc}, "gone-"+node+"-"+inc); err != nil {
			w.errs.warn(w.log, "a dead node's webhook state not removed: tried again at the next renewal", "node", node, "err", err)
			continue
		}
		w.lmu.Lock()
		w.goneSent[node+"/"+inc] = true
		w.lmu.Unlock()
		w.log.Info("a node's webhook lease ended: its connections leave, in the webhooks too", "node", node)
	}
}

// liveNodes returns the nodes whose leases live: id → incarnation.
func (w *NATS) liveNodes(ctx context.Context) (map[string]string, error) {
	kw, err := w.leases.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = kw.Stop() }()
	live := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e := <-kw.Updates():
			if e == nil {
				return live, nil
			}
			if e.Key() != natsDispatcherKey {
				live[e.Key()] = string(e.Value())
			}
		}
	}
}
