package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// natsLease is this node's lease: a key of its own in the nodes' bucket,
// whose MaxAge is the lease, put again every quarter of it. While it lives
// (by this node's clock: from the start of its last renewal that
// succeeded) the node orders the rooms it holds; another node takes a room
// over only once the key is gone.
type natsLease struct {
	kv  jetstream.KeyValue
	ttl time.Duration
	// until is when the lease lapses by this node's clock (unix nanoseconds).
	until  atomic.Int64
	lapsed atomic.Bool // it lapsed and was not checked since
}

// natsLeaseMargin is how long before the key can expire the node stops
// ordering: the renewal's round trip and the clocks' drift.
const natsLeaseMargin = 500 * time.Millisecond

func (l *natsLease) open(ctx context.Context, js jetstream.JetStream, name string, ttl time.Duration, replicas int) error {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: name, History: 1, Replicas: replicas, Storage: jetstream.FileStorage, TTL: ttl,
	})
	if err != nil {
		return fmt.Errorf("open the nodes' bucket %s: %w", name, err)
	}
	l.kv, l.ttl = kv, ttl
	return nil
}

// renew puts this node's key; the lease lives a ttl (less the margin) from
// before the put.
func (l *natsLease) renew(ctx context.Context, id string, value []byte) error {
	start := time.Now()
	ctx, cancel := withDeadline(ctx, l.ttl/4)
	defer cancel()
	if _, err := l.kv.Put(ctx, id, value); err != nil {
		return fmt.Errorf("renew this node's lease: %w", err)
	}
	l.until.Store(start.Add(l.ttl - natsLeaseMargin).UnixNano())
	return nil
}

// live reports whether the lease lives now.
func (l *natsLease) live() bool { return time.Now().UnixNano() < l.until.Load() }

// alive reports whether node's lease key is still there.
func (l *natsLease) alive(ctx context.Context, node string) (bool, error) {
	_, err := l.kv.Get(ctx, node)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("read node %s's lease: %w", node, err)
	}
}

// leaseLoop renews the lease every quarter of it. After a lapse (the node
// was stopped, or cut off) it checks every room it holds against the
// rooms' records before its joiners go on: a room another node took over
// meanwhile is dropped.
func (b *NATS) leaseLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.Lease / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !b.lease.live() {
			b.lease.lapsed.Store(true)
		}
		if err := b.lease.renew(ctx, b.id, b.leaseValue()); err != nil {
			if ctx.Err() == nil {
				b.failed("renew the lease", err)
			}
			continue
		}
		if b.lease.lapsed.Load() {
			b.checkHeld(ctx)
			b.lease.lapsed.Store(false)
			b.h.LeaseRenewed()
		}
	}
}

// checkHeld drops every room this node holds whose record names another
// holder, or another epoch.
func (b *NATS) checkHeld(ctx context.Context) {
	for _, h := range b.st.held() {
		room, epoch := h.room, h.epoch
		rec, err := b.rooms.read(ctx, room)
		if err != nil {
			b.failed("check a room after the lease lapsed", err)
			continue
		}
		if rec.holder != b.id || rec.epoch != epoch {
			b.out.forget(room)
			b.lostRoom(room, "taken over while this node's lease had lapsed")
		}
	}
}
