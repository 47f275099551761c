package broker

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Room ownership: every room of a cluster has one owner node, which orders
// all its messages (redis_follow.go says how the other nodes follow it).
//
//   - Getting it. The first node to load a room claims its holder key (SET
//     NX, in the load's pipeline, before it reads the counter) and owns it:
//     its messages are ordered, stored in the room's history and delivered
//     on that node at once, and written to Redis afterwards (the room's
//     stream and seq, a few milliseconds of them per round), so that Redis
//     is off the message's path. A node that finds the room held follows
//     its holder.
//   - Keys. The room's holder names the owning node. Each node keeps a lease
//     of its own alive in Redis (nodeLease, renewed every second): while it
//     lives, the node's rooms are its own.
//   - Giving it up. A node that frees a room hands it to one of its
//     followers (handover.lua), or, with none, releases it (release.lua):
//     its last seq written, the holder deleted; the next node to load the
//     room claims it and loads it from Redis.
//   - Failure. A node whose owner does not answer within a second while the
//     owner's lease is gone, or nobody listens on its node's channel (it
//     died: Redis dropped its subscription), takes the room over
//     (takeover.lua): the room's epoch changes, so clients that resume with
//     the old one get a reset and the history Redis holds, never a seq that
//     means something else. An owner whose lease lapsed (stopped, cut off)
//     orders nothing and lets nobody join its owned rooms until it checked
//     which are still its own; the others it drops: their members are
//     closed with 1012 and rejoin the new stream.
//
// docs/architecture.md says what each failure costs.

const (
	// nodeLease is how long a node's lease lives in Redis after its last
	// renewal; it is renewed every nodeLease/3.
	nodeLease = 3 * time.Second
	// leaseMargin is how long before its lease ends in Redis that a node
	// stops ordering, for the time its renewal took to get there.
	leaseMargin = time.Second
)

// maxPersistBatch bounds the messages of one persistScript call
// (lua/persist.lua): Redis serves nothing else while a script runs.
const maxPersistBatch = 128

func (b *Redis) holderKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:holder" }

// roomNodesKey is the set of nodes that loaded the room.
func (b *Redis) roomNodesKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:nodes" }

// leaseKey is a node's lease: while it lives, the rooms the node holds are
// its own.
func (b *Redis) leaseKey(node string) string { return b.cfg.Prefix + ":node:" + node + ":lease" }

// owns records that this node holds the room (it claimed it as it loaded
// it, or it was handed it), whose seqs up to from are ordered already.
func (b *Redis) owns(room string, from uint64) {
	subscribed := b.sub.subscribed(room)
	b.own.grant(room, from)
	if !subscribed { // freed while the grant was on its way: give it back
		b.release(room, 0)
	}
}

// holds reports whether this node holds the room and has not given it up.
func (b *Redis) holds(room string) bool { return b.own.holds(room) }

// publishOwned orders p here when this node holds its room and its lease
// lives (the rooms check the rest: Handler.PublishOwned); false otherwise.
// A room not held costs one lock-free look-up, not the room's lock.
func (b *Redis) publishOwned(p Publication) (uint64, bool) {
	g, from, ok := b.ordersHere(p.Room)
	if !ok {
		return 0, false
	}
	defer g.leave()
	return b.h.PublishOwned(p, from, b.keep)
}

// ordersHere enters the room's grant when this node holds it, is not
// ceding it and its lease lives, and returns the seq after which it orders
// here (publishOwned, onFollowAsk); the caller leaves the grant once the
// room ordered.
func (b *Redis) ordersHere(room string) (g *grant, from uint64, ok bool) {
	g, from, ok = b.own.enter(room)
	if ok && b.lease.lapsed() {
		g.leave()
		return nil, 0, false
	}
	return g, from, ok
}

// JoinsWait implements JoinGate: joiners of a room this node holds wait
// while its lease has lapsed (the room may be another node's by now), until
// the next lease, which comes once verifyHeld dropped the rooms lost. It
// takes no lock (the rooms call it under a room's lock).
func (b *Redis) JoinsWait(room string) bool {
	return b.lease.lapsed() && b.own.holds(room)
}

// release gives up the room: after the writes already queued, so Redis's
// seq is the room's last.
func (b *Redis) release(room string, seq uint64) {
	if b.own.giveUp(room) {
		if fs := b.own.takeFollowers(room); len(fs) > 0 {
			b.handOff(room, seq, fs)
			return
		}
		b.count.releases.Add(1)
		b.pub.queue(job{kind: jobRelease, room: room, e: Entry{Seq: seq}})
	}
}

// lostRoom handles a room another node took over while this one thought it
// held it: the room is dropped here (its members rejoin the new stream).
func (b *Redis) lostRoom(room string) {
	b.own.giveUp(room)
	b.tellDropped(room)
	if b.h.Drop(room, nil) {
		b.count.dropped.Add(1)
		b.log.Warn("room taken over by another node: its members rejoin", "room", room)
	}
}

// onControl handles the control messages of a room's channel.
func (b *Redis) onControl(ctx context.Context, name, payload string) {
	if strings.HasPrefix(payload, "P") {
		b.onPresence(name, payload)
		return
	}
	if epoch, ok := strings.CutPrefix(payload, "E"); ok {
		b.onNewStream(name, epoch)
		return
	}
	if taker, ok := strings.CutPrefix(payload, "T"); ok && taker != b.id {
		// Taken over by the node named, to which it is no news: an owner
		// that missed it is no longer one.
		b.onTakenOver(name)
	}
}

// onTakenOver handles another node's takeover of a room: if this node
// thought it owned the room, it lost it; if it followed the room's old
// owner, it loads the room again from the new one.
func (b *Redis) onTakenOver(name string) {
	if b.own.holds(name) {
		b.lostRoom(name)
	}
	if b.own.ownerOf(name) != "" {
		b.dropFollowed(name, "taken over by another node", false)
	}
}

// onNewStream handles "E<epoch>": the room's stream started anew in Redis
// under epoch, its keys having been gone (expired while nodes kept the room
// loaded, or flushed), made by a node that loaded the room. Its seqs start
// again at 1: a node that has the room under another epoch would take them
// for messages it has, so it drops the room and its members resume into the
// new stream and are told (reset).
func (b *Redis) onNewStream(name, epoch string) {
	if e, _, _ := b.h.Position(name); e != "" && e != epoch {
		b.lostStream(name, "Redis no longer had the room's keys (expired or flushed): it started anew")
	}
}

func (b *Redis) publishControl(ctx context.Context, name, msg string) error {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return b.controlCmd(c, b.rdb, name, msg).Err()
}

// controlCmd sends msg on the room's channel through r (the client, or a
// pipeline): on its shard channel in a Redis Cluster.
func (b *Redis) controlCmd(ctx context.Context, r redis.Cmdable, name, msg string) *redis.IntCmd {
	if b.cluster != nil {
		return r.SPublish(ctx, b.channel(name), msg)
	}
	return r.Publish(ctx, b.channel(name), msg)
}

// leaseLoop keeps this node's lease alive in Redis. A renewal that comes
// after the lease lapsed (the node was stopped, or could not reach Redis)
// first checks which of the rooms it held are still its own.
func (b *Redis) leaseLoop(ctx context.Context) {
	t := time.NewTicker(nodeLease / 3)
	defer t.Stop()
	var lc leaseClock
	for {
		if b.health.ready() {
			b.renewLease(ctx, &lc, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.lease.wake:
		}
	}
}

// renewLease renews this node's lease in Redis, sent at sent, doing first
// what lc asks of the renewal (redis_clock.go).
func (b *Redis) renewLease(ctx context.Context, lc *leaseClock, sent time.Time) {
	r := lc.renew(sent)
	c, cancel := context.WithTimeout(ctx, time.Second)
	err := b.leaseRdb.Set(c, b.leaseKey(b.id), "1", nodeLease).Err()
	cancel()
	switch {
	case err != nil:
		lc.fail()
		if ctx.Err() == nil {
			b.fail("renew the node's lease", err)
		}
		return
	case r.verify && !b.verifyHeld(ctx):
		return
	case r.rejoin && !b.rejoin(ctx):
		return
	}
	until, checkPeers := lc.renewed(r)
	// After a lapse, the rooms taken over meanwhile were dropped
	// (verifyHeld): the new lease lets the joiners of the others go on
	// (Handler.LeaseRenewed).
	b.setLease(until, r.verify)
	if checkPeers {
		b.checkPeers(ctx)
	}
}

// verifyHeld checks the rooms this node holds against Redis: those another
// node took over are dropped; the joiners of the others go on with the
// lease renewLease gives next. It reports whether Redis answered.
func (b *Redis) verifyHeld(ctx context.Context) bool {
	rooms := b.own.heldRooms()
	if len(rooms) == 0 {
		return true
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmds, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for _, r := range rooms {
			p.Get(c, b.holderKey(r))
		}
		return nil
	})
	if err := pipelineErr(cmds, err); err != nil {
		b.fail("check the rooms held", err)
		return false
	}
	for i, r := range rooms {
		if cmds[i].(*redis.StringCmd).Val() != b.id {
			b.lostRoom(r)
		}
	}
	return true
}

func errorsIsNil(err error) bool { return errors.Is(err, redis.Nil) }

// pipelineErr returns Pipelined's error, or else the first error of its
// cmds, that is not redis.Nil. Pipelined answers the first error only, and
// a key that is missing (redis.Nil) would hide a failed command after it.
func pipelineErr(cmds []redis.Cmder, err error) error {
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
	}
	return nil
}

// leaseState is until when this node's held rooms are its own, read by
// every delivery and by fail, and the wake of the loop that renews it
// (leaseLoop). No lock: one atomic word, and a channel.
type leaseState struct {
	until atomic.Int64  // unix nanoseconds: see setLease
	wake  chan struct{} // renew the node's lease now (Redis is back)
}

// lapsed reports whether this node's lease lapsed (it was stopped): rooms
// it held may have been taken over.
func (l *leaseState) lapsed() bool { return l.lapsedAt(time.Now()) }

// lapsedAt reports whether this node's lease had lapsed at now.
func (l *leaseState) lapsedAt(now time.Time) bool { return now.UnixNano() >= l.until.Load() }

// setLease says until when this node's held rooms are its own. A lease
// after a lapsed one (verified: its renewal checked the rooms held, as the
// lease clock asked; or the lease had lapsed by now anyway) lets in the
// joiners that waited meanwhile (Handler.LeaseRenewed, which takes the
// rooms' locks one at a time): it is given once verifyHeld dropped the
// rooms taken over. Renewing a live lease, or fail's extension of one,
// tells the rooms nothing and takes no lock, whatever its caller holds.
func (b *Redis) setLease(until time.Time, verified bool) {
	now, end := time.Now().UnixNano(), until.UnixNano()
	if prev := b.lease.until.Swap(end); (verified || prev <= now) && now < end {
		b.h.LeaseRenewed()
	}
}
