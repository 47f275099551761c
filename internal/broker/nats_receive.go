package broker

import "context"

// receiveRound reads a round another node sent this one: its records in
// the order made, consecutive messages handed to the rooms in one batch.
func (b *NATS) receiveRound(payload []byte) {
	r := natsReader{b: payload}
	sender := string(r.bytes())
	if r.err != nil {
		b.count.errors.Add(1)
		return
	}
	var batch []Delivered
	flush := func() {
		if len(batch) > 0 {
			b.count.received.Add(uint64(len(batch)))
			b.h.DeliverMany(batch)
			batch = nil
		}
	}
	err := readNATSRecords(r.b, func(rec natsRecord) {
		if rec.kind == natsRecMsg {
			if d, ok := b.onMsgRec(sender, rec); ok {
				batch = append(batch, d)
			}
			return
		}
		flush()
		switch rec.kind {
		case natsRecSnapshot:
			b.onSnapshot(sender, rec)
		case natsRecAck, natsRecRefuse:
			b.onAnswer(rec)
		case natsRecRelease:
			b.onRelease(sender, rec)
		case natsRecNoFollow:
			b.ownerGone(rec.room)
		case natsRecForward:
			b.orderForward(sender, rec.id, rec.publication())
		}
	})
	flush()
	if err != nil {
		b.failed("read a round from node "+sender, err)
	}
}

// onMsgRec takes a message of a room followed from sender, in seq order; a
// gap asks the owner for its snapshot again, and the room's messages wait
// for it.
func (b *NATS) onMsgRec(sender string, rec natsRecord) (Delivered, bool) {
	deliver, gap := b.st.accept(sender, rec.room, rec.seq)
	if gap {
		b.count.gaps.Add(1)
		b.request(rec.room, "f", roomKey(rec.room), nil)
	}
	return Delivered{Room: rec.room, Seq: rec.seq, Payload: rec.payload}, deliver
}

// onSnapshot loads a room from its owner's snapshot, or brings a followed
// room up to it (after a gap, or from a new owner), and sends on what was
// published into it meanwhile.
func (b *NATS) onSnapshot(sender string, rec natsRecord) {
	to, missed, forwards := b.st.snapshot(sender, rec)
	switch to {
	case natsSnapshotStale:
		b.request(rec.room, "u", roomKey(rec.room), nil) // not followed here (any more)
		return
	case natsSnapshotBroken:
		b.lostRoom(rec.room, "its stream changed, or its owner no longer has what this node missed")
		return
	case natsSnapshotLoads:
		b.h.Loaded(rec.room, rec.epoch, rec.seq, rec.tail)
	}
	if len(missed) > 0 {
		b.count.received.Add(uint64(len(missed)))
		b.h.DeliverMany(missed)
	}
	for _, fw := range forwards {
		b.sendForward(fw)
	}
}

// onAnswer settles a forward: ordered, or not (its owner does not hold the
// room now: the sender is told to send it again).
func (b *NATS) onAnswer(rec natsRecord) {
	fw, drain := b.st.takeForward(rec.id)
	if fw == nil {
		return // given up already
	}
	switch {
	case rec.kind == natsRecAck:
		b.count.published.Add(1)
		b.h.Settled(fw.p, rec.seq, nil)
	case rec.code == natsRefuseOverloaded:
		b.count.overloaded.Add(1)
		b.h.Settled(fw.p, 0, ErrOverloaded)
	default:
		b.giveUp(fw.p)
	}
	if drain {
		b.wg.Go(func() { b.drainWaiting(fw.p.Room, fw.gen) })
	}
}

// onRelease: the owner let go of a room followed here after seq. This node
// claims it: the winner orders it from there (having every message up to
// seq), the others follow the winner.
func (b *NATS) onRelease(sender string, rec natsRecord) {
	gen, have, ok := b.st.releasedBy(sender, rec.room, rec.epoch)
	if ok {
		b.wg.Go(func() { b.succeed(b.runCtx(), rec.room, gen, rec.epoch, have) })
	}
}

// succeed claims a released room this node follows, holding every message
// up to have.
func (b *NATS) succeed(ctx context.Context, room string, gen uint64, epoch string, have uint64) {
	rec, err := b.rooms.claim(ctx, room, b.id, NewEpoch)
	if err != nil {
		b.failed("claim a released room", err)
		b.lostRoom(room, "it could not be claimed")
		return
	}
	if rec.holder != b.id {
		b.askFollow(room, gen, rec.holder)
		return
	}
	if rec.epoch != epoch || rec.seq > have {
		// Missed messages, or another stream: load it anew, as its owner.
		b.lostRoom(room, "its stream moved on while its owner let go of it")
		return
	}
	end, err := b.hist.end(ctx, room)
	if err != nil {
		b.failed("take on a released room", err)
		b.lostRoom(room, "its history could not be read")
		return
	}
	sub, err := b.nc.ChanSubscribe(b.ownSubject(room), b.ownCh)
	if err != nil {
		b.failed("subscribe to a room's owner subject", err)
	}
	b.out.own(room, epoch, end)
	if !b.st.own(room, gen, epoch, have, sub) {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		b.out.forget(room)
		_ = b.rooms.handOver(ctx, room, b.id, "", have)
		return
	}
	b.count.owned.Add(1)
	b.drainWaiting(room, gen)
}
