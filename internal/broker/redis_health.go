package broker

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

func (b *Redis) fail(op string, err error) {
	b.count.errs.Add(1)
	msg := op + ": " + err.Error()
	b.count.lastErr.Store(&msg)
	if b.up.CompareAndSwap(true, false) {
		b.downSince.Store(time.Now().UnixNano())
		// Cut off, the node goes on ordering the rooms it owns, joins
		// of them included (messages to other rooms are refused); once back, it checks which are still its
		// own (leaseLoop). Not when the lease had lapsed already (the node
		// was stopped, and a command failed on waking): rooms it held may
		// be another node's by now, and their joiners wait for the check.
		if !b.leaseLapsed() {
			b.setLease(time.Now().Add(100 * 365 * 24 * time.Hour))
		}
		b.log.Warn("redis unreachable: owned rooms go on, messages to shared rooms are refused", "op", op, "err", err)
		signal(b.upWake)
	}
}

func (b *Redis) checkUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if b.cluster != nil {
		if err := clusterHealthy(ctx, b.cluster); err != nil {
			b.fail("ping", err)
			return false
		}
		if err := b.clientRoutes(ctx); err != nil {
			b.fail("ping", err)
			return false
		}
		err := b.cluster.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return loadScripts(ctx, m)
		})
		if err != nil {
			b.fail("load script", err)
			return false
		}
		return true
	}
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		b.fail("ping", err)
		return false
	}
	if err := loadScripts(ctx, b.rdb); err != nil {
		b.fail("load script", err)
		return false
	}
	return true
}

// healthLoop waits for Redis to come back after a failure, with backoff,
// then brings every room up to date.
func (b *Redis) healthLoop(ctx context.Context) {
	backoff := newBackoff()
	for {
		if b.up.Load() {
			select {
			case <-ctx.Done():
				return
			case <-b.upWake:
				continue
			}
		}
		if !backoff.sleep(ctx) {
			return
		}
		if !b.checkUp(ctx) {
			continue
		}
		if err := b.reshard(ctx); err != nil {
			b.fail("resubscribe", err)
			continue
		}
		// From here on publishes queue for Redis, but none is sent until
		// every room's counter is above the seqs it handed out alone: a
		// message sent before would take one of them again.
		b.localMu.Lock()
		b.recovering.Store(true)
		b.up.Store(true)
		b.localMu.Unlock()
		for _, name := range b.sub.names() {
			b.catchUp(ctx, name)
		}
		b.recovering.Store(false)
		b.republishPresence()
		signal(b.leaseWake)
		if !b.up.Load() {
			continue // failed again while catching up
		}
		backoff.reset()
		b.count.reconnects.Add(1)
		b.log.Info("redis reachable again: resuming cross-node delivery",
			"after", time.Duration(time.Now().UnixNano()-b.downSince.Load()).Round(time.Millisecond))
	}
}

// backoff is an exponential backoff with full jitter, 50 ms to 5 s.
type backoff struct{ next time.Duration }

func newBackoff() backoff { return backoff{next: 50 * time.Millisecond} }

func (b *backoff) reset() { b.next = 50 * time.Millisecond }

// sleep waits for the next attempt and reports whether ctx is still live.
func (b *backoff) sleep(ctx context.Context) bool {
	d := time.Duration(rand.Int64N(int64(b.next))) + b.next/2
	b.next = min(b.next*2, 5*time.Second)
	return sleepCtx(ctx, d)
}
