package broker

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// healthState is whether Redis answers, and the outage in progress. up and
// recovering are read without a lock, on every publish. localMu marks the
// end of an outage's local publishing: a publish ordered here alone holds it
// (read) from its check of up to the message's order, and recovery takes
// it (write) to set up, so that it knows the last such publish is done.
// localMu is held across a call into the rooms (Room.mu, then
// publisher.mu); nothing else is taken under it.
type healthState struct {
	started    atomic.Bool   // Run has tried Redis once: until then publishes wait for it
	up         atomic.Bool   // true from Run's first check, false from a failed command until healthLoop finds Redis back
	recovering atomic.Bool   // Redis is back, the rooms' counters are being raised: hold publishes
	localMu    sync.RWMutex  // held (read) by a local publish; taken to end local publishing
	downSince  atomic.Int64  // unix nanoseconds: when up last went false
	answered   atomic.Int64  // unix nanoseconds: when Redis last answered slowNotDown's ping
	slowLogged atomic.Int64  // unix nanoseconds: when a slow call was last logged
	wake       chan struct{} // Redis failed: healthLoop checks it again, with backoff
}

// ready reports whether Redis answers and every room has been checked
// against its stream since the last outage.
func (h *healthState) ready() bool { return h.up.Load() && !h.recovering.Load() }

// fell notes that Redis failed, and reports whether it was up until now.
func (h *healthState) fell() bool {
	if !h.up.CompareAndSwap(true, false) {
		return false
	}
	h.downSince.Store(time.Now().UnixNano())
	return true
}

// startRecovery waits for the last local publish of the outage, then marks
// Redis up and the rooms recovering: publishes queue from then on, and
// none is sent until recovering ends.
func (h *healthState) startRecovery() {
	h.localMu.Lock()
	h.recovering.Store(true)
	h.up.Store(true)
	h.localMu.Unlock()
}

// whileDown runs publish, a publish ordered here alone, with localMu
// read-held if Redis is still down, and reports whether it ran: when it
// did not, Redis came back since the caller last looked.
func (h *healthState) whileDown(publish func()) bool {
	h.localMu.RLock()
	defer h.localMu.RUnlock()
	if h.up.Load() {
		return false
	}
	publish()
	return true
}

// downFor is how long Redis has been down, until now.
func (h *healthState) downFor() time.Duration {
	return time.Duration(time.Now().UnixNano() - h.downSince.Load())
}

func (b *Redis) fail(op string, err error) {
	b.count.errs.Add(1)
	msg := op + ": " + err.Error()
	b.count.lastErr.Store(&msg)
	if b.health.up.Load() && b.slowNotDown(err) {
		if b.health.slowLogDue(time.Now()) {
			b.log.Warn("a Redis call timed out behind this node's own traffic while Redis answers: the node is past its capacity, Redis is not taken for down", "op", op, "err", err)
		}
		return
	}
	if b.health.fell() {
		// Cut off, the node goes on ordering the rooms it owns, joins
		// of them included (messages to other rooms are refused); once
		// back, it checks which are still its own (leaseLoop). See cutOff.
		if until, ok := b.lease.cutOff(time.Now()); ok {
			b.setLease(until, false)
		}
		b.log.Warn("redis unreachable: owned rooms go on, messages to shared rooms are refused", "op", op, "err", err)
		signal(b.health.wake)
	}
}

// slowNotDown reports whether err is a timeout of a call that waited behind
// this node's own traffic while Redis itself answers: asked on the lease's
// connection (Redis.leaseRdb), which nothing else queues on, Redis answered
// a ping within a second, or did less than probeFresh ago. Past a
// cluster's capacity the pool's connections carry long rounds, and a call
// that timed out behind them took Redis for down: publishes to shared
// rooms were refused, and the recovery that followed closed members with
// 1012 (two nodes past their knee on 16 cores, 2026-11-28). Its caller
// waits for the ping, up to a second, only when a call timed out already.
//
// One Redis only: on a Redis Cluster a timeout may be a master dying (a
// failover under way), an outage for its slots while the others answer,
// and it is taken for one as before (pinging every master on the lease's
// connections instead lost messages across the failover of
// TestRedisClusterShardsRoomsAndSurvivesFailover, 3 runs of 6 under -race).
func (b *Redis) slowNotDown(err error) bool {
	if b.cluster != nil || !isTimeout(err) {
		return false
	}
	if t := b.health.answered.Load(); t != 0 && time.Since(time.Unix(0, t)) < probeFresh {
		return true
	}
	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if b.leaseRdb.Ping(c).Err() != nil {
		return false
	}
	b.health.answered.Store(time.Now().UnixNano())
	return true
}

// probeFresh is how long a ping's answer stands for the timeouts after it.
const probeFresh = 100 * time.Millisecond

// isTimeout reports whether err says a call ran out of time, not that
// Redis refused or dropped the connection.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.As(err, &ne) && ne.Timeout()
}

// slowLogDue reports whether a slow call may be logged now: once every
// ten seconds.
func (h *healthState) slowLogDue(now time.Time) bool {
	last := h.slowLogged.Load()
	return now.UnixNano()-last >= int64(10*time.Second) && h.slowLogged.CompareAndSwap(last, now.UnixNano())
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
		if b.health.up.Load() {
			select {
			case <-ctx.Done():
				return
			case <-b.health.wake:
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
		b.health.startRecovery()
		for _, name := range b.sub.names() {
			b.catchUp(ctx, name)
		}
		b.health.recovering.Store(false)
		b.republishPresence()
		signal(b.lease.wake)
		if !b.health.up.Load() {
			continue // failed again while catching up
		}
		backoff.reset()
		b.count.reconnects.Add(1)
		b.log.Info("redis reachable again: resuming cross-node delivery",
			"after", b.health.downFor().Round(time.Millisecond))
	}
}

// backoff is an exponential backoff with jitter, from 50 ms up to
// maxBackoff.
type backoff struct{ next time.Duration }

// maxBackoff bounds backoff: a node tries Redis again at least about once
// a second (each sleep within 1.5 times it), so that after an outage of any
// length it is back within the lease of grace its peers give it
// (leaseLoop's back) and they do not take it for dead. A dial and a PING a
// second a node cost Redis nothing. It was 5 s (sleeps up to 7.5 s): a node
// back that late lost the rooms it owned to their followers.
const maxBackoff = nodeLease / 4

func newBackoff() backoff { return backoff{next: 50 * time.Millisecond} }

func (b *backoff) reset() { b.next = 50 * time.Millisecond }

// sleep waits for the next attempt and reports whether ctx is still live.
func (b *backoff) sleep(ctx context.Context) bool {
	d := time.Duration(rand.Int64N(int64(b.next))) + b.next/2
	b.next = min(b.next*2, maxBackoff)
	return sleepCtx(ctx, d)
}
