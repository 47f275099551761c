package broker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// One owner per room: every room a node loads has an
// owner, the node that claimed its holder key first, and the owner orders
// every message of the room itself, as it does for a room whose members
// are all its own. Redis carries what nodes send each other on their node
// channels, in batches, and stores the history behind; no script runs for
// a message.
//
//   - Following. A node that loads a room another node holds sends it F on
//     the owner's channel; the owner answers, under the room's order, with
//     a snapshot of the room (epoch, seq, history) and from then on sends
//     every message it orders there (M records, batched per round and per
//     node). Both travel through one Redis, which writes a subscriber's
//     messages in the order it ran the PUBLISHes: the follower sees the
//     snapshot, then each message once, in seq order.
//   - Publishing. A follower forwards its members' publishes to the owner
//     (P), which orders them like its own and answers with the seq (A;
//     0 when it no longer orders the room: the sender is refused).
//   - Leaving. A follower that frees the room tells the owner (U). An owner
//     that frees it hands it to one of its followers (handover.lua: the
//     holder key moves only from this node, and the new owner and the
//     others are told by Redis in the same script, after every message
//     this node sent them).
//   - Failure. A follower whose owner's lease ended (checkPeers) drops the
//     room: its members resume (1012), the next load finds the dead holder,
//     asks it, and takes the room over after a second without an answer
//     under a new epoch (takeover.lua): the members get reset and the
//     history Redis holds. An owner stopped past its lease orders nothing
//     until it checked its rooms (verifyHeld), as before.

// followWait is how long a node waits for an owner's snapshot before it
// checks the owner's lease.
const followWait = time.Second

// forwardTimeout is how long a forwarded publish waits for the owner's
// answer before its sender is refused: the owner was stopped or cut off.
// Well within the owner's lease, so that the sender is told while its
// connection is still up (the room is dropped, and its members closed,
// once the lease ended); an owner that answers later still delivers the
// message, as the refusal says it may.
const forwardTimeout = time.Second

// forwardSweepLoop refuses the forwarded publishes that waited longer than
// forwardTimeout, checking four times a timeout.
func (b *Redis) forwardSweepLoop(ctx context.Context) {
	t := time.NewTicker(forwardTimeout / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b.expireForwards(now)
			b.expireParked(now)
			for _, node := range b.own.takeMarksBefore(forwardDeadline(now)) {
				b.leftUnheard(node) // its mark lost
			}
		}
	}
}

// sendTo queues rec (a record of redis_followwire.go) for node's channel,
// in the next round.
func (b *Redis) sendTo(node string, rec []byte) {
	b.pub.queue(job{kind: jobSend, node: node, rec: rec})
}

// keepFollowed is keep's part for a room with followers: each gets the
// message. The caller holds the room's lock, so they queue in seq order.
func (b *Redis) keepFollowed(room string, e Entry) bool {
	fs := b.own.followersOf(room)
	if len(fs) == 0 {
		return false
	}
	// The M record is made when the round is sent (sendPayload), from the
	// room's frame, which nobody changes: nothing allocated here a message
	// for a room of a few followers.
	var buf [4]job
	jobs := buf[:0]
	for _, n := range fs {
		jobs = append(jobs, job{kind: jobSend, node: n, room: room, e: e})
	}
	b.pub.add(jobs...)
	return true
}

// forwardPublish sends p on to the owner of its room, if this node follows
// the room, and reports whether it did.
func (b *Redis) forwardPublish(fw forward) bool {
	owner := b.own.ownerOf(fw.p.Room)
	if owner == "" {
		return false
	}
	fw.owner, fw.sent = owner, time.Now()
	req := b.own.addPending(fw)
	b.sendTo(owner, encForward(fw.p.Room, b.id, req, fw.p.Prefix, fw.p.Suffix))
	return true
}

// onFollow handles a payload of owner-protocol records from the node's
// channel, in order: runs of messages are delivered as a batch's are.
func (b *Redis) onFollow(ctx context.Context, payload string) {
	now := time.Now().UnixNano()
	recs, err := splitFollow(payload, nil)
	if err != nil {
		b.count.errs.Add(1)
		b.log.Warn("owner-protocol records were dropped: their rooms fill the gap from their streams at their next message", "err", err, "bytes", len(payload))
	}
	var run []record
	for _, r := range recs {
		if r.kind == recTime {
			b.count.transit.observe(int64(r.seq), now)
			continue
		}
		if r.kind == recMessage {
			run = append(run, record{room: r.room, seq: r.seq, json: r.json})
			continue
		}
		if len(run) > 0 {
			b.deliverRecords(ctx, run)
			run = run[:0]
		}
		b.onFollowRec(r)
	}
	if len(run) > 0 {
		b.deliverRecords(ctx, run)
	}
}

// onFollowRec handles one record that is not a message.
func (b *Redis) onFollowRec(r followRec) {
	switch r.kind {
	case recAck:
		fw, ok := b.own.takePending(r.req)
		p := fw.p
		switch {
		case !ok: // refused already: it waited too long
		case r.seq == 0:
			b.retryForward(fw)
		default:
			b.count.published.Add(1)
			b.own.answered(p.Room, fw.ticket)
			b.h.Settled(p, r.seq, nil)
		}
	case recBusy:
		if fw, ok := b.own.takePending(r.req); ok {
			b.own.answered(fw.p.Room, fw.ticket)
			b.count.overloaded.Add(1)
			b.h.Settled(fw.p, 0, ErrOverloaded)
		}
	case recSnapshot, recNotOwner:
		b.own.answer(r)
	case recFollow:
		b.onFollowAsk(r.room, r.node)
	case recUnfollow:
		b.own.removeFollower(r.room, r.node)
	case recForward:
		b.onForward(r)
	case recOwn:
		b.own.setOwner(r.room, "")
		b.own.setFollowers(r.room, r.nodes)
		b.owns(r.room, r.seq)
		b.unparkForwards(r.room)
	case recOwner:
		if b.own.ownerOf(r.room) != "" {
			b.own.setOwner(r.room, r.node)
		}
	case recDropped:
		if b.own.ownerOf(r.room) == r.node {
			b.dropFollowed(r.room, "its owner dropped it", false)
		}
	case recMark:
		if node, ok := b.own.takeMark(r.req); ok {
			b.leftUnheard(node)
		}
	}
}

// tellDropped tells the followers of a room this node ordered, and drops
// now, that its stream ended here: they drop it too (their members resume
// into the room loaded anew) instead of following an owner that orders
// nothing, whose next stream they would hear of only at the next load.
func (b *Redis) tellDropped(room string) {
	for _, node := range b.own.takeFollowers(room) {
		b.sendTo(node, encRoomNode(recDropped, room, b.id))
	}
}

// onFollowAsk answers a node that asks to follow a room: its snapshot,
// taken under the room's order, or N when this node does not order it now.
func (b *Redis) onFollowAsk(room, node string) {
	g, from, ok := b.ordersHere(room)
	if ok {
		_, _, _, ok = b.h.Follow(room, from, func(epoch string, seq uint64, tail []Entry) {
			b.own.addFollower(room, node)
			b.sendTo(node, encSnapshot(room, epoch, seq, tail))
		})
		g.leave()
	}
	if !ok {
		b.sendTo(node, encNotOwner(room))
	}
}

// onForward orders a follower's publish as this node's own, and answers
// the follower with its seq (after the message itself, which keep sent it
// under the room's order), or 0 when the room is not ordered here.
//
// Past its capacity (overloaded or behind, as Publish judges its own
// members' messages) the owner refuses it instead (B): ordered, it would
// queue for the followers behind the rest, and the owner's own members
// would be refused while the followers' publishes went through and waited
// seconds (two nodes past the knee on the VM, 2026-11-28: the owner of
// most rooms refused 588k of its members' sends, ordered every forward,
// and delivered them a second late).
func (b *Redis) onForward(r followRec) {
	if b.parkForward(r) {
		return
	}
	node, req := r.node, r.req
	if b.overloaded() || b.behind() {
		b.count.overloaded.Add(1)
		b.sendTo(node, encBusy(req))
		return
	}
	p := Publication{Room: r.room, Prefix: []byte(r.prefix), Suffix: []byte(r.suffix), Received: time.Now().UnixNano(), From: -1}
	seq, _ := b.publishOwned(p) // 0: not ordered here now
	// After the message itself, which keep queued for the follower under
	// the room's order: the answer never overtakes it.
	b.sendTo(node, encAck(req, seq))
}

// followRoom loads a room another node holds from that node: it asks to
// follow, and waits for the snapshot. An owner that does not answer within
// followWait while its lease is gone is taken over, and the room loaded
// again (now this node's). It runs on its own goroutine, one per room.
func (b *Redis) followRoom(ctx context.Context, name, owner string, st *roomState) {
	w := b.own.await(name)
	defer b.own.stopAwaiting(name, w)
	for ctx.Err() == nil && b.sub.stillSubscribed(name, st) {
		b.sendTo(owner, encRoomNode(recFollow, name, b.id))
		a := ownerAsk{self: b.id, owner: owner, at: time.Now(), wait: followWait}
		t := time.NewTimer(time.Until(a.checkAt()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case r := <-w:
			t.Stop()
			if r.kind == recNotOwner {
				b.reload(ctx, name, st, 50*time.Millisecond)
				return
			}
			b.followed(name, owner, st, r)
			return
		case <-t.C:
		}
		now, reload := b.checkOwner(ctx, name, a)
		if reload {
			b.reload(ctx, name, st, 0)
			return
		}
		owner = now
	}
}

// followed finishes a room's load from its owner's snapshot.
func (b *Redis) followed(name, owner string, st *roomState, r followRec) {
	if !b.sub.stillSubscribed(name, st) {
		b.sendTo(owner, encRoomNode(recUnfollow, name, b.id))
		return
	}
	b.own.setOwner(name, owner)
	b.sub.keepAlive(name, st)
	b.h.Loaded(name, r.epoch, r.seq, r.tail)
}

// checkOwner reads the room's holder after its owner did not answer: it
// returns the owner to ask next, or reload when the room is to be loaded
// again (nobody holds it, or this node does, or it took the room over from
// an owner whose lease is gone).
func (b *Redis) checkOwner(ctx context.Context, name string, a ownerAsk) (next string, reload bool) {
	owner := a.owner
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	now, err := b.rdb.Get(c, b.holderKey(name)).Result()
	switch {
	case err != nil && !errorsIsNil(err):
		b.fail("read a room's holder", err)
		return owner, false
	case a.onHolder(now) == holderFree:
		return "", true
	case a.onHolder(now) == holderMoved:
		return now, false
	}
	alive, err := b.rdb.Exists(c, b.leaseKey(owner)).Result()
	listens := true
	if err == nil && alive == 1 {
		// A live lease whose node listens to nothing: it died (Redis
		// dropped its subscription at once) or lost Redis; either way it
		// answers no one.
		var n int64
		n, err = b.nodeListeners(c, owner)
		listens = n > 0
	}
	if err != nil || !takeOver(alive == 1, listens) {
		return owner, false
	}
	ttl := int(b.roomConfigOf(name).TTL / time.Second)
	if err := takeoverScript.Run(c, b.rdb, b.publishKeys(name), owner, NewEpoch(), ttl).Err(); err != nil {
		b.fail("take a room over", err)
		return owner, false
	}
	b.count.takeovers.Add(1)
	b.log.Warn("room taken over from an owner whose lease ended", "room", name, "owner", owner)
	if err := b.publishControl(ctx, name, "T"+b.id); err != nil {
		b.fail("take a room over", err)
	}
	return "", true
}

// reload loads the room again after wait, if it is still subscribed.
func (b *Redis) reload(ctx context.Context, name string, st *roomState, wait time.Duration) {
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	if b.sub.stillSubscribed(name, st) {
		b.load(ctx, map[string]*roomState{name: st})
	}
}

// unfollow tells a room's owner that this node frees the room.
func (b *Redis) unfollow(room string) {
	if owner := b.own.ownerOf(room); owner != "" {
		b.own.setOwner(room, "")
		b.sendTo(owner, encRoomNode(recUnfollow, room, b.id))
	}
}

// ownerGone drops the rooms this node follows from node, gone (why: its
// lease ended, or it was found unheard and its mark came back): their
// members resume, and the next load takes the room over (checkOwner). What
// was forwarded to it is refused first: its answer could only come once the
// node hears again, by when the drop has closed the senders, who would
// never learn. It may have been ordered (Refused says so to the handler).
func (b *Redis) ownerGone(node, why string) {
	b.refuseForwardsTo(node)
	for _, room := range b.own.followedFrom(node) {
		b.dropFollowed(room, why, true)
	}
}

// refuseForwardsTo refuses what was forwarded to node and not answered. It
// runs before the rooms followed from node are dropped, while the senders'
// connections are up: the drop closes the rooms' members.
func (b *Redis) refuseForwardsTo(node string) {
	for _, fw := range b.own.takeExpired(time.Time{}, node) {
		b.unsent(fw)
	}
}

// dropFollowed drops a room followed here: its members resume into the
// room loaded anew. With fill (its owner is gone) what the room held and
// Redis lacks is written behind it (redis_fill.go).
func (b *Redis) dropFollowed(room, why string, fill bool) {
	b.own.setOwner(room, "")
	var keep func(string, uint64, []Entry)
	if fill {
		keep = b.fillFrom(room)
	}
	if b.h.Drop(room, keep) {
		b.count.dropped.Add(1)
		b.log.Warn("followed room dropped: its members resume", "room", room, "why", why)
	}
}

// unheard handles a node whose channel nobody listens to (a PUBLISH to it
// reached no one): it died, stopped, or lost its connection to Redis. What
// it sent this node before it stopped listening may still be on its way:
// its answers to forwarded publishes, a stopping owner's handover of a
// room (recOwn), read on this node's subscription while the round that
// found the node unheard came back on another connection. So this node
// sends itself a mark, behind all of that in its channel, and settles what
// the node left (leftUnheard) when the mark comes back (onFollowRec); or,
// when its own channel is the one unheard, at once; or, when the mark is
// lost, after forwardTimeout (forwardSweepLoop). Settled at once, a
// forwarded publish the stopping owner had answered was refused (and
// delivered), about one run in fifteen of
// TestRedisOwnerStoppingHandsOverWhatFollowersSend under -race.
func (b *Redis) unheard(node string) {
	if node == b.id {
		// Nothing comes on a channel nobody listens to: no mark either.
		for _, n := range b.own.takeMarksBefore(time.Now().Add(time.Nanosecond)) {
			b.leftUnheard(n)
		}
		return
	}
	b.sendTo(b.id, encMark(b.own.markUnheard(node, time.Now())))
}

// leftUnheard settles what a node found unheard left (ownerGone), its mark
// back or lost.
func (b *Redis) leftUnheard(node string) { b.ownerGone(node, "its owner no longer listens to Redis") }

// forwardToHolder sends a publish whose room this node does not order now
// (loading it, or owning it but not ordering yet; a forward the old owner
// declined) to the room's holder of the moment: its owner, or this node's
// room (orderHere). A room nobody holds yet (its load here or elsewhere
// has not claimed it) is looked at again retryWait later; after
// maxForwardTries the publish is refused.
func (b *Redis) forwardToHolder(ctx context.Context, fw forward) {
	if ctx.Err() != nil {
		// Stopping (an answer read as the node hands its rooms over):
		// Run no longer waits for a goroutine started now.
		b.unsent(fw)
		return
	}
	b.waitWG.Go(func() {
		if b.own.holds(fw.p.Room) {
			// Handed to this node meanwhile (a cede's handover read
			// before the old owner declined): no holder to ask Redis
			// for, nor to wait for. Past a 16-core cluster's knee the
			// reads of holders that many cedes' declines made, behind the
			// rounds in the pool, timed out and took Redis for down.
			b.orderHere(ctx, fw)
			return
		}
		if fw.tries > 1 && !sleepCtx(ctx, retryWait) {
			b.unsent(fw)
			return
		}
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		holder, err := b.rdb.Get(c, b.holderKey(fw.p.Room)).Result()
		cancel()
		if err == nil && holder == b.id {
			b.orderHere(ctx, fw)
			return
		}
		if err != nil && !errorsIsNil(err) {
			if ctx.Err() == nil {
				b.fail("read a room's holder", err)
			}
			b.unsent(fw)
			return
		}
		if holder == "" {
			b.retryForward(fw)
			return
		}
		fw.owner, fw.sent = holder, time.Now()
		req := b.own.addPending(fw)
		b.sendTo(holder, encForward(fw.p.Room, b.id, req, fw.p.Prefix, fw.p.Suffix))
	})
}

// orderHere orders a publish whose room was handed to this node while it
// was on its way to the old owner (a drained node's), once it is the
// first of the room's publishes out (ownState.firstOut): the publishes
// handed back here go in the order they were sent, each waiting for those
// before it, whether these are waiting here too or still out at another
// node. Behind another, it looks again as soon as a publish out is
// answered; declined (the handover's record not read yet), it is tried
// again retryWait/4 later; after forwardTimeout it is refused.
func (b *Redis) orderHere(ctx context.Context, fw forward) {
	until := time.Now().Add(forwardTimeout)
	t := time.NewTimer(retryWait / 4)
	defer t.Stop()
	for {
		first, answered := b.own.firstOut(fw.p.Room, fw.ticket)
		if first {
			if seq, ok := b.publishOwned(fw.p); ok {
				b.own.answered(fw.p.Room, fw.ticket)
				b.h.Settled(fw.p, seq, nil)
				return
			}
			// Declined: only the next try tells (answered is nil).
		}
		if time.Now().After(until) {
			b.own.answered(fw.p.Room, fw.ticket)
			b.giveUp(fw.p)
			return
		}
		t.Reset(retryWait / 4)
		select {
		case <-ctx.Done():
			b.own.answered(fw.p.Room, fw.ticket)
			b.giveUp(fw.p)
			return
		case <-answered:
		case <-t.C:
		}
	}
}

// retryForward sends a forwarded publish again, to the room's holder of
// the moment, after retryWait; after maxForwardTries its sender is
// refused. Only for a publish no owner ordered (its owner answered that it
// does not order the room now, loading it or having lost it; or its
// record reached nobody): sent again, it may be ordered by the room's next
// owner instead of refused. One that may have been ordered is never sent
// again: it would be ordered twice.
func (b *Redis) retryForward(fw forward) {
	if fw.tries >= maxForwardTries {
		b.unsent(fw)
		return
	}
	fw.tries++
	b.forwardToHolder(b.runCtx(), fw)
}

// sendUnheard sends again, to the holder of the moment, the publishes
// forwarded in the send jobs js of batch, whose PUBLISH reached nobody:
// no owner got them, so none ordered them.
func (b *Redis) sendUnheard(batch []job, js []int) {
	for _, fw := range b.forwardsIn(batch, js) {
		b.retryForward(fw)
	}
}

// forwardsIn takes the pending forwards whose records are in the send
// jobs js of batch.
func (b *Redis) forwardsIn(batch []job, js []int) []forward {
	var fws []forward
	for _, i := range js {
		rec := batch[i].rec
		if len(rec) == 0 || rec[0] != recForward {
			continue
		}
		if rs, err := splitFollow(string(rec), nil); err == nil && len(rs) == 1 {
			if fw, ok := b.own.takePending(rs[0].req); ok {
				fws = append(fws, fw)
			}
		}
	}
	return fws
}

// sendFailed refuses at once the publishes forwarded in the send jobs js
// of batch, which did not reach Redis: waiting for an answer that cannot
// come, their senders could be gone (their room dropped) before being told.
func (b *Redis) sendFailed(batch []job, js []int) {
	for _, fw := range b.forwardsIn(batch, js) {
		b.unsent(fw)
	}
}

// expireForwards refuses the forwarded publishes whose owner has not
// answered within forwardTimeout.
func (b *Redis) expireForwards(now time.Time) {
	for _, fw := range b.own.takeExpired(forwardDeadline(now), "") {
		b.unsent(fw)
	}
}

// maxSendBatch bounds the records of one PUBLISH to a node's channel.
const maxSendBatch = 256

// sendPayload joins the records of the send jobs js of batch into one
// payload for their node's channel, after a T record of sent, when the
// round was made (unix nanoseconds; redis_transit.go).
func sendPayload(batch []job, js []int, sent int64) []byte {
	n := 1 + 21
	for _, i := range js {
		j := &batch[i]
		n += len(j.rec) + len(j.room) + len(j.e.Payload) + 32
	}
	payload := appendUint(append(make([]byte, 0, n), followMark, recTime), uint64(sent))
	for _, i := range js {
		if j := &batch[i]; j.rec != nil {
			payload = append(payload, j.rec...)
		} else { // a message keep queued: its M record
			payload = appendMessage(payload, j.room, j.e.Seq, j.e.Payload)
		}
	}
	return payload
}

// handOff hands an owned room this node frees to the first of its
// followers, telling the others who owns it now.
func (b *Redis) handOff(room string, seq uint64, followers []string) {
	b.count.releases.Add(1)
	b.pub.queue(b.handoffJob(room, seq, followers))
}

func (b *Redis) handoffJob(room string, seq uint64, followers []string) job {
	return job{kind: jobHandover, room: room, e: Entry{Seq: seq}, nodes: followers}
}

// handoverCmd queues handover.lua for job j on p. On one Redis the script
// tells the new owner (O) and the other followers (W) itself, after every
// record this node sent them; on a Redis Cluster their channels are in
// other slots than the room's keys, which a script may not reach, and
// tellHandover sends the records once the script answered.
func (b *Redis) handoverCmd(ctx context.Context, p redis.Pipeliner, j job) redis.Cmder {
	ttl := ttlArg(b.roomConfigOf(j.room).TTL + renewInterval(b.roomConfigOf(j.room).TTL))
	args := []any{b.id, j.nodes[0], ttl, j.e.Seq}
	if b.cluster == nil {
		handoverRecords(j, func(node string, rec []byte) {
			args = append(args, b.nodeChannelPrefix()+node, append([]byte{followMark}, rec...))
		})
	}
	return handoverScript.EvalSha(ctx, p, b.publishKeys(j.room), args...)
}

// tellHandover sends the records of a handover the script made (a Redis
// Cluster): in a later round than every record this node sent the nodes
// before, so each still gets the room's messages first.
func (b *Redis) tellHandover(j job) { handoverRecords(j, b.sendTo) }

// handoverRecords gives each node of handover job j its record: the new
// owner (j.nodes[0]) an O naming the other followers, each of those a W
// naming the new owner.
func handoverRecords(j job, to func(node string, rec []byte)) {
	owner, others := j.nodes[0], j.nodes[1:]
	to(owner, encOwn(j.room, j.e.Seq, others))
	for _, n := range others {
		to(n, encRoomNode(recOwner, j.room, owner))
	}
}

// publishToNode queues a payload for node's channel on p: PUBLISH on one
// Redis, SPUBLISH (its shard channel) on a Redis Cluster.
func (b *Redis) publishToNode(ctx context.Context, p redis.Pipeliner, node string, payload []byte) *redis.IntCmd {
	if b.cluster != nil {
		return p.SPublish(ctx, b.nodeChannelPrefix()+node, payload)
	}
	return p.Publish(ctx, b.nodeChannelPrefix()+node, payload)
}

// nodeListeners returns how many connections listen on node's channel.
func (b *Redis) nodeListeners(ctx context.Context, node string) (int64, error) {
	ch := b.nodeChannelPrefix() + node
	if b.cluster != nil {
		n, err := b.rdb.PubSubShardNumSub(ctx, ch).Result()
		return n[ch], err
	}
	n, err := b.rdb.PubSubNumSub(ctx, ch).Result()
	return n[ch], err
}
