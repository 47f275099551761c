package broker

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Room ownership: the node-local fast path of a cluster.
//
// A room that only one node has loaded is owned by that node: its
// messages are ordered, stored in the room's history and delivered on that
// node at once, and written to Redis afterwards (the room's stream and seq,
// a few milliseconds of them per round), so that Redis is off the message's
// path. A room whose members are on several nodes is ordered by Redis.
//
//   - Getting it. Each node adds itself to a room's set of nodes when it
//     loads the room, and leaves it when it frees the room (a dead node is
//     removed by the others when its lease ends). The publish script grants
//     the room to the publishing node when nobody holds it and the node is
//     the only one in the set: an explicit membership, which a dropped
//     subscription (a failover, a network blip) does not change. The node
//     orders messages itself once every seq Redis handed out before came
//     back on its channel.
//   - Keys. The room's holder names the owning node. Each node keeps a lease
//     of its own alive in Redis (nodeLease, renewed every second): while it
//     lives, the node's rooms are its own.
//   - Giving it up. A node that loads a held room publishes "H" on the
//     room's channel and waits. The owner stops ordering (Disown), writes
//     what it ordered, deletes the holder, raises the seq counter to its
//     last seq and publishes "R"; the new node then loads the room from
//     Redis as any other. A node also releases the rooms it frees.
//   - Failure. When no "R" comes within a second and the holder no longer
//     listens on the room's channel (it died: Redis dropped its
//     subscription) or its lease is gone (it stalls, or is cut off), the
//     new node takes the room over: the
//     room's epoch changes, so clients that resume with the old one get a
//     reset and the history Redis holds, never a seq that means something
//     else. An owner whose lease lapsed (stopped, cut off) orders nothing
//     and lets nobody join its owned rooms until it checked which are still
//     its own; the others it drops: their members are closed with 1012 and
//     rejoin the new stream.
//   - A node that finds, on catching up, that another node was granted a
//     room it has loaded (its membership was lost with Redis's data) holds
//     its publishes of the room, asks for it, and catches up before they go.
//
// docs/architecture.md says what each failure costs.

const (
	// nodeLease is how long a node's lease lives in Redis after its last
	// renewal; it is renewed every nodeLease/3.
	nodeLease = 3 * time.Second
	// leaseMargin is how long before its lease ends in Redis that a node
	// stops ordering, for the time its renewal took to get there.
	leaseMargin = time.Second
	// releaseWait is how long a node waits for an owner's "R" before it
	// checks the lease.
	releaseWait = time.Second
)

// maxPublishBatch bounds the messages of one publishScript call
// (lua/publish.lua): Redis serves nothing else while a script runs.
const maxPublishBatch = 64

// maxPersistBatch bounds the messages of one persistScript call
// (lua/persist.lua), for the same reason; a stored message costs Redis
// less than a published one (no INCR, no PUBLISH).
const maxPersistBatch = 128

func (b *Redis) holderKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:holder" }

// roomNodesKey is the set of nodes that loaded the room.
func (b *Redis) roomNodesKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:nodes" }

// leaseKey is a node's lease: while it lives, the rooms the node holds are
// its own.
func (b *Redis) leaseKey(node string) string { return b.cfg.Prefix + ":node:" + node + ":lease" }

// owns records that Redis granted this node the room, whose seqs up to
// from were handed out by Redis.
func (b *Redis) owns(room string, from uint64) {
	subscribed := b.sub.subscribed(room)
	b.own.grant(room)
	if !subscribed { // freed while the grant was on its way: give it back
		b.release(room, 0)
		return
	}
	b.h.Own(room, from)
}

// holds reports whether Redis granted this node the room and it has not
// given it up.
func (b *Redis) holds(room string) bool { return b.own.holds(room) }

// release gives up the room: after the writes already queued, so Redis's
// seq is the room's last.
func (b *Redis) release(room string, seq uint64) {
	if b.own.giveUp(room) {
		if fs := b.own.takeFollowers(room); b.cfg.OwnerOrder && len(fs) > 0 {
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
	b.h.Disown(room)
	if b.h.Drop(room, nil) {
		b.count.dropped.Add(1)
		b.log.Warn("room taken over by another node: its members rejoin", "room", room)
		b.Unsubscribe(room)
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
	if taker, ok := strings.CutPrefix(payload, "T"); ok && taker != "" {
		// Taken over by the node named (the owner order's takeover): not
		// news to that node, which may own the room by now.
		if taker != b.id {
			b.onTakenOver(name)
		}
		return
	}
	switch payload {
	case "H": // a node wants the room (with owner order, nodes follow it instead)
		if b.cfg.OwnerOrder {
			return
		}
		if seq, owned := b.h.Disown(name); owned {
			b.release(name, seq)
		}
	case "R": // the owner released the room
		b.sub.released(name)
	case "T": // taken over: an owner that missed it is no longer one
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
// loaded, or flushed), made by a node that loaded the room or by a publish
// (publish.lua). Its seqs start again at 1: a node that has the room under
// another epoch would take them for messages it has, so it drops the room
// and its members resume into the new stream and are told (reset).
func (b *Redis) onNewStream(name, epoch string) {
	if e := b.h.Epoch(name); e != "" && e != epoch {
		b.lostStream(name, "Redis no longer had the room's keys (expired or flushed): it started anew")
	}
}

// awaitRelease waits until the room's holder released it (or lost it), then
// loads the room. It runs on its own goroutine, one per room waiting.
func (b *Redis) awaitRelease(ctx context.Context, name, holder string, st *roomState) {
	b.awaitHolder(ctx, name, holder, func(bool) { b.load(ctx, map[string]*roomState{name: st}) })
}

// awaitHolder asks the room's holder to release it and waits until it did,
// or until the room is taken over from a holder that does not answer; then
// calls done, telling whether it took the room over.
func (b *Redis) awaitHolder(ctx context.Context, name, holder string, done func(tookOver bool)) {
	w := b.sub.await(name)
	defer b.sub.stopAwaiting(name, w)
	ttl := int(b.roomConfigOf(name).TTL / time.Second)
	for ctx.Err() == nil {
		if err := b.publishControl(ctx, name, "H"); err != nil {
			b.fail("ask for a room", err)
		}
		a := ownerAsk{self: b.id, owner: holder, at: time.Now(), wait: releaseWait}
		t := time.NewTimer(time.Until(a.checkAt()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w:
			t.Stop()
			done(false)
			return
		case <-t.C:
		}
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		// The room may have been released without this node hearing it
		// (its R went to another waiter, or came before this one began):
		// then nobody is left to answer.
		now, err := b.rdb.Get(c, b.holderKey(name)).Result()
		switch {
		case err != nil && !errorsIsNil(err):
			cancel()
			b.fail("read a room's holder", err)
			continue
		case a.onHolder(now) == holderFree:
			cancel()
			done(false)
			return
		case a.onHolder(now) == holderMoved:
			holder = now // another node took it meanwhile: ask that one
			cancel()
			continue
		}
		alive, err := b.rdb.Exists(c, b.leaseKey(holder)).Result()
		listens := true
		if err == nil && alive == 1 {
			// A live holder that does not answer may hold a room it no
			// longer listens to: then this node is the room's only
			// subscriber.
			var subs int64
			subs, err = b.subscribers(c, name)
			listens = subs > 1
		}
		var took int64
		if err == nil && takeOver(alive == 1, listens) {
			took, err = takeoverScript.Run(c, b.rdb, b.publishKeys(name), holder, NewEpoch(), ttl).Int64()
		}
		cancel()
		if err != nil {
			b.fail("take a room over", err)
			continue
		}
		if took == 1 {
			b.count.takeovers.Add(1)
			b.log.Warn("room taken over from a node that did not answer", "room", name, "holder", holder)
			if err := b.publishControl(ctx, name, "T"); err != nil {
				b.fail("take a room over", err)
			}
			done(true)
			return
		}
	}
}

// block holds the publishes of a loaded room that another node holds (a
// grant made while this node's subscription or membership was lost: after
// a failover, a Redis restart): its messages wait, the holder is asked to
// release the room, and this node then catches up with what the holder
// ordered before they go out. p, when not nil, is the first to wait.
func (b *Redis) block(ctx context.Context, name string, p *Publication) {
	if b.own.block(name, p) {
		return // waiting already
	}
	b.count.blockedRooms.Add(1)
	b.waitWG.Go(func() {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		holder, err := b.rdb.Get(c, b.holderKey(name)).Result()
		cancel()
		if err != nil && !errorsIsNil(err) {
			b.fail("read a room's holder", err)
		}
		release := func(tookOver bool) {
			if tookOver {
				// Another stream of the room from now on: its members
				// here rejoin it.
				if b.h.Drop(name, nil) {
					b.count.dropped.Add(1)
					b.Unsubscribe(name)
				}
			} else {
				b.catchUp(ctx, name)
			}
			// The held publishes go out ahead of any that comes once the
			// room is no longer blocked: queued before the room is let go.
			b.own.unblock(name, b.pub.addPublishes)
			signal(b.pub.wake)
		}
		if holder == "" || holder == b.id {
			release(false) // released meanwhile
			return
		}
		b.awaitHolder(ctx, name, holder, release)
	})
}

// blockedPublish queues p behind the others of its room when the room is
// blocked, and reports whether it did.
func (b *Redis) blockedPublish(p Publication) bool { return b.own.holdBack(p) }

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

// isSeq reports whether a channel message is a chat message ("seq json"),
// not a control message.
func isSeq(payload string) bool { return payload != "" && payload[0] >= '0' && payload[0] <= '9' }

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
	err := b.rdb.Set(c, b.leaseKey(b.id), "1", nodeLease).Err()
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
	b.setLease(until)
	if r.verify {
		// Joins that came between the check and the new lease waited on
		// the lapsed one: they go on now.
		for _, room := range b.own.heldRooms() {
			b.h.Verified(room)
		}
	}
	if checkPeers {
		b.checkPeers(ctx)
	}
}

// verifyHeld checks the rooms this node holds against Redis: those another
// node took over are dropped, the others' waiting joiners go on. It reports
// whether Redis answered.
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
		if cmds[i].(*redis.StringCmd).Val() == b.id {
			b.h.Verified(r)
		} else {
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

// subscribers returns the number of connections subscribed to the room's
// channel.
func (b *Redis) subscribers(ctx context.Context, name string) (int64, error) {
	ch := b.channel(name)
	if b.cluster != nil {
		n, err := b.rdb.PubSubShardNumSub(ctx, ch).Result()
		return n[ch], err
	}
	n, err := b.rdb.PubSubNumSub(ctx, ch).Result()
	return n[ch], err
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

// setLease says until when this node's held rooms are its own, to the
// rooms and to the receiving side.
func (b *Redis) setLease(until time.Time) {
	b.lease.until.Store(until.UnixNano())
	b.h.Lease(until)
}
