package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publish implements Broker. It never blocks: a message of a room this
// node holds is ordered and delivered here at once, its copies to the
// room's followers and its history going out behind; any other goes to the
// room's owner (a forward), or waits for the room to load. While the node
// is cut off from NATS, a room held here that no other node follows goes
// on, and any other refuses the message (ErrUnavailable), as on Redis.
func (b *NATS) Publish(p Publication) (uint64, error) {
	up := b.count.up.Load()
	if b.behind() {
		return 0, b.refuseOverloaded()
	}
	over := b.overloaded()
	if from, ok := b.st.ownedFrom(p.Room, true); ok {
		if !b.lease.live() || !up && b.out.followed(p.Room) {
			b.count.refused.Add(1)
			return 0, ErrUnavailable // another node may be taking the room over
		}
		if over && b.out.followed(p.Room) {
			return 0, b.refuseOverloaded()
		}
		if seq, ok := b.h.PublishOwned(p, from, b.keep); ok {
			return seq, nil
		}
		return 0, ErrDropped // held here, and not ordering: the room was freed as it came
	}
	if !up {
		b.count.refused.Add(1)
		return 0, ErrUnavailable
	}
	if over {
		return 0, b.refuseOverloaded()
	}
	// On its way: the broker keeps p past the call.
	p.Prefix, p.Suffix = append([]byte(nil), p.Prefix...), append([]byte(nil), p.Suffix...)
	p.From = -1 // delivered from the broker's goroutine
	switch route, from, fw := b.st.route(p); route {
	case natsGone:
		return 0, ErrDropped
	case natsDirect: // held here since the look above
		if !b.lease.live() {
			b.count.refused.Add(1)
			return 0, ErrUnavailable
		}
		if seq, ok := b.h.PublishOwned(p, from, b.keep); ok {
			return seq, nil
		}
		return 0, ErrDropped
	case natsForwarded:
		b.sendForward(fw)
	}
	return 0, nil
}

// overloaded reports whether the records for other nodes waited longer
// than MaxWait: NATS (or this node's rounds to it) carries less than comes
// in, and a message queued now would wait at least that long. A room held
// here that no other node follows is never refused for it.
func (b *NATS) overloaded() bool {
	return b.cfg.MaxWait > 0 && b.out.waited() > b.cfg.MaxWait
}

// behind reports whether the history writes pending passed
// maxPendingWrites (with MaxWait on): then every message is refused.
func (b *NATS) behind() bool {
	return b.cfg.MaxWait > 0 && b.out.writes.Load() > maxPendingWrites
}

func (b *NATS) refuseOverloaded() error {
	b.count.overloaded.Add(1)
	return ErrOverloaded
}

// keep queues a message an owned room ordered for its followers and its
// history. The room calls it under its lock, so a room's messages queue in
// seq order.
func (b *NATS) keep(room string, e Entry) {
	b.count.ownedPublished.Add(1)
	b.out.keep(room, e)
}

// roundLoop sends the queued records, each node's in one message, at most
// a linger after the first of them was queued.
func (b *NATS) roundLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			b.round(ctx) // what the rooms' release queued
			return
		case <-b.out.wake:
		}
		if !sleepCtx(ctx, b.cfg.Linger) {
			b.round(ctx)
			return
		}
		b.round(ctx)
	}
}

func (b *NATS) round(ctx context.Context) {
	q := b.out.take()
	if len(q) == 0 {
		return
	}
	for node, recs := range q {
		payload := appendString(make([]byte, 0, len(recs)+len(b.id)+1), b.id)
		// The reply subject brings the server's "no responders" back when
		// node is gone (nodeUnheard); a node never answers a round.
		if err := b.bus.send(node, append(payload, recs...), b.bus.replySubject(b.id, "r", node)); err != nil {
			b.failed("send a round", err)
		}
	}
	if err := b.bus.flush(ctx); err != nil && ctx.Err() == nil {
		b.failed("send a round", err)
	}
}

func (b *NATS) failed(what string, err error) {
	b.count.errors.Add(1)
	b.log.Warn("NATS broker: "+what+" failed", "err", err)
}

// historyLoop writes the owned rooms' messages to their history, a run a
// room a linger, every room's write at once (asynchronous publishes).
// It alone writes history while it runs (a room's writes chain on the end
// the last one left: the fence); a release asks it to write at once
// (flushHistory), and after it (the node stopping) the release writes.
func (b *NATS) historyLoop(ctx context.Context) {
	defer close(b.histDone)
	for {
		select {
		case <-ctx.Done():
			b.writeHistory(context.Background())
			return
		case done := <-b.histFlush:
			b.writeHistory(ctx)
			close(done)
			continue
		case <-b.out.histWake:
		}
		b.lingerHistory(ctx)
	}
}

// lingerHistory waits the history linger and writes; a release's flush
// cuts the wait short (a second, by default: the release, and its
// followers' publishes, would wait that long).
func (b *NATS) lingerHistory(ctx context.Context) {
	t := time.NewTimer(b.cfg.HistoryLinger)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return // the loop writes what is left
	case <-t.C:
		b.writeHistory(ctx)
	case done := <-b.histFlush:
		b.writeHistory(ctx)
		close(done)
	}
}

// flushHistory has what is pending written now: by the history loop while
// it runs, here once it ended.
func (b *NATS) flushHistory(ctx context.Context) {
	done := make(chan struct{})
	select {
	case b.histFlush <- done:
		select {
		case <-done:
		case <-b.histDone:
		}
	case <-b.histDone:
		b.writeHistory(ctx)
	case <-ctx.Done():
	}
}

// writeHistory writes what is pending. A room whose write is refused by
// the fence was taken over: it is dropped here.
func (b *NATS) writeHistory(ctx context.Context) {
	type write struct {
		room string
		run  []Entry
		ack  jetstream.PubAckFuture
	}
	var writes []write
	for room, run := range b.out.takeHistory() {
		pos := b.out.position(room)
		if pos == nil || b.roomHistory(room) == 0 {
			b.out.written(len(run))
			continue // not held here any more (taken over), or nothing kept
		}
		m := b.hist.runMsg(room, pos.epoch, run)
		ack, err := b.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(pos.end))
		if err != nil {
			b.failed("write history", err)
			b.out.putBack(room, run)
			continue
		}
		writes = append(writes, write{room: room, run: run, ack: ack})
	}
	wait, cancel := withDeadline(ctx, natsHistoryWait)
	defer cancel()
	for _, w := range writes {
		select {
		case a := <-w.ack.Ok():
			b.out.wrote(w.room, a.Sequence)
			b.out.written(len(w.run))
		case err := <-w.ack.Err():
			if isWrongLastSequence(err) {
				b.out.written(len(w.run))
				b.out.forget(w.room)
				b.lostRoomLater(w.room, "its history was written by another node (taken over)")
				continue
			}
			b.failed("write history", err)
			b.out.putBack(w.room, w.run)
		case <-wait.Done():
			b.failed("write history", wait.Err())
			b.out.putBack(w.room, w.run)
		}
	}
}

// roomHistory is how many messages room keeps.
func (b *NATS) roomHistory(room string) int {
	if b.cfg.Room != nil {
		return b.cfg.Room(room).History
	}
	return b.cfg.History
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// lostRoomLater drops a room on a goroutine of its own: the caller holds
// a lock the room's drop may need.
func (b *NATS) lostRoomLater(room, why string) {
	b.wg.Go(func() { b.lostRoom(room, why) })
}

// lostRoom drops a room this node held and another took: its members
// rejoin the room as loaded anew.
func (b *NATS) lostRoom(room, why string) {
	b.count.dropped.Add(1)
	b.log.Info("NATS broker: dropped a room", "room", room, "why", why)
	b.h.Drop(room, nil)
}

// ownLoop answers what other nodes send the owner subjects of the rooms
// held here: forwards to order and follows to serve.
func (b *NATS) ownLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-b.ownCh:
			b.onOwnerMsg(m)
		}
	}
}

// onOwnerMsg reads the request's kind and sender from its reply subject,
// <prefix>.node.<sender>.<kind>.<tail>.
func (b *NATS) onOwnerMsg(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Reply, b.cfg.Prefix+".node.")
	parts := strings.SplitN(rest, ".", 3)
	room, err := roomOfKey(strings.TrimPrefix(m.Subject, b.cfg.Prefix+".own."))
	if !ok || len(parts) != 3 || err != nil {
		b.count.errors.Add(1)
		return
	}
	sender, kind := parts[0], parts[1]
	switch kind {
	case "f":
		b.serveFollow(sender, room)
	case "u":
		b.out.unfollow(room, sender)
	}
}

// orderForward orders another node's publish in a room held here and
// answers it after the message's own record to that node.
func (b *NATS) orderForward(sender string, id uint64, p Publication) {
	if b.overloaded() || b.behind() {
		b.count.overloaded.Add(1)
		b.out.add(sender, func(q []byte) []byte { return appendAnswerRec(q, natsRecRefuse, id, natsRefuseOverloaded) })
		return
	}
	from, owned := b.st.ownedFrom(p.Room, true)
	if owned && b.lease.live() {
		if seq, ok := b.h.PublishOwned(p, from, b.keep); ok {
			b.out.add(sender, func(q []byte) []byte { return appendAnswerRec(q, natsRecAck, id, seq) })
			return
		}
	}
	b.out.add(sender, func(q []byte) []byte { return appendAnswerRec(q, natsRecRefuse, id, natsRefuseMoved) })
}

// serveFollow hands a new follower the room's snapshot, in order before its
// next messages, or tells it to ask again.
func (b *NATS) serveFollow(sender, room string) {
	from, owned := b.st.ownedFrom(room, false)
	if owned && b.lease.live() {
		_, _, _, ok := b.h.Follow(room, from, func(epoch string, seq uint64, tail []Entry) {
			b.out.follow(room, sender, epoch, seq, tail)
		})
		if ok {
			return
		}
	}
	b.out.add(sender, func(q []byte) []byte { return appendNoFollowRec(q, room) })
}

// roomOfKey is roomKey's inverse.
func roomOfKey(key string) (string, error) {
	r, err := base64.RawURLEncoding.DecodeString(key)
	return string(r), err
}

// release hands a room this node held on: its history written, its record
// released after its last seq, its followers told to claim it. Called when
// its last member here left (Unsubscribe) or the node stops.
func (b *NATS) release(ctx context.Context, room, epoch string, seq uint64) {
	for b.out.pendingHistory(room) && ctx.Err() == nil {
		b.flushHistory(ctx)
	}
	seq = b.out.lastSeq(room, seq)
	b.out.forget(room)
	err := b.rooms.handOver(ctx, room, b.id, "", seq)
	if err != nil && !errors.Is(err, errRoomMoved) {
		b.failed("release a room", err)
	}
	b.count.releases.Add(1)
	b.out.release(room, epoch, seq)
}

// releaseAll releases every room held here: the node stops.
//
// The rooms leave the node's state first: a forward that arrives after is
// refused (its sender told), where ordering it would answer its sender and
// send the message to nobody (the followers were told the room was let go
// of: the audit's lost send under a SIGTERM, 2 of 11 runs of one seed).
func (b *NATS) releaseAll(ctx context.Context) {
	for _, r := range b.st.removeHeld() {
		b.release(ctx, r.room, r.epoch, r.from)
	}
	b.round(ctx)
}
