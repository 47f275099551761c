package broker

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// natsForwardWait is how long a forward waits for its owner's answer
// before it is given up (Settled with ErrUnavailable).
const natsForwardWait = 2 * time.Second

// natsRetry is how long a load waits before it asks again (the owner could
// not serve it yet, or NATS failed).
const natsRetry = 100 * time.Millisecond

// Subscribe implements Broker: the room loads on a goroutine of its own,
// as its owner (the first node to claim it) or as a follower of its owner.
func (b *NATS) Subscribe(room string) {
	sub, err := b.nc.ChanSubscribe(b.roomSubject(room), b.roomCh)
	if err != nil {
		b.failed("subscribe to a room", err)
	}
	gen, released := b.st.add(room, sub)
	b.count.rooms.Add(1)
	b.wg.Go(func() {
		if released != nil {
			<-released // this node's release of the room ends first
		}
		b.pres.subscribed(b, room)
		b.load(room, gen)
	})
}

// Unsubscribe implements Broker. A room held here is released (its
// followers claim it); a followed one is left.
func (b *NATS) Unsubscribe(room string) {
	rs, done := b.st.remove(room)
	if rs == nil {
		return
	}
	waiting := rs.waiting
	b.count.rooms.Add(-1)
	for _, s := range []*nats.Subscription{rs.roomSub, rs.ownSub} {
		if s != nil {
			_ = s.Unsubscribe()
		}
	}
	b.pres.unsubscribed(room)
	for _, p := range waiting {
		b.giveUp(p)
	}
	switch rs.role {
	case natsOwned:
		b.count.owned.Add(-1)
		b.wg.Go(func() {
			defer b.st.released(room, done)
			b.release(b.runCtx(), room, rs.epoch, rs.from)
		})
	case natsFollowing:
		b.request(room, "u", roomKey(room), nil)
	}
}

// giveUp refuses p, which waited for its room, and tells its sender.
func (b *NATS) giveUp(p Publication) {
	b.count.refused.Add(1)
	b.h.Settled(p, 0, ErrUnavailable)
}

// request sends data to room's owner subject, its reply subject under this
// node's naming its kind: the owner's answer, or the server's no
// responders, comes back on this node's subscription.
func (b *NATS) request(room, kind, tail string, data []byte) {
	m := &nats.Msg{Subject: b.ownSubject(room), Reply: b.bus.replySubject(b.id, kind, tail), Data: data}
	if err := b.nc.PublishMsg(m); err != nil {
		b.failed("send to a room's owner", err)
	}
}

// load finds room's holder and loads the room from it: claimed here, from
// the history; held by a live node, from its snapshot (asked for here,
// handed to receive); held by a dead one, taken over first.
func (b *NATS) load(room string, gen uint64) {
	ctx := b.runCtx()
	for ctx.Err() == nil && b.st.isLoading(room, gen) {
		rec, err := b.rooms.claim(ctx, room, b.id, NewEpoch)
		if err == nil && rec.holder == b.id {
			if err = b.loadOwned(ctx, room, gen, rec); err == nil {
				return
			}
		}
		if err == nil {
			var alive bool
			if alive, err = b.lease.alive(ctx, rec.holder); err == nil && alive {
				b.askFollow(room, gen, rec.holder)
				return
			}
			if err == nil {
				err = b.takeOver(ctx, room, rec.holder)
			}
		}
		if err != nil && ctx.Err() == nil {
			b.failed("load a room", err)
			sleepCtx(ctx, natsRetry)
		}
	}
}

// loadOwned loads a room this node claimed from its history and starts
// ordering it. When the room went away meanwhile it is released again.
func (b *NATS) loadOwned(ctx context.Context, room string, gen uint64, rec roomRecord) error {
	epoch, tail, end, err := b.hist.read(ctx, room, b.roomHistory(room))
	if err != nil {
		return err
	}
	if epoch != rec.epoch {
		tail = nil // a takeover's mark, or nothing written in this epoch yet
	}
	seq := rec.seq
	if len(tail) > 0 {
		seq = max(seq, tail[len(tail)-1].Seq)
	}
	b.out.own(room, rec.epoch, end)
	b.h.Loaded(room, rec.epoch, seq, tail)
	sub, err := b.nc.ChanSubscribe(b.ownSubject(room), b.ownCh)
	if err != nil {
		b.failed("subscribe to a room's owner subject", err)
	}
	if !b.st.own(room, gen, rec.epoch, seq, sub) {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		b.out.forget(room)
		return b.rooms.handOver(ctx, room, b.id, "", seq)
	}
	b.count.owned.Add(1)
	b.drainWaiting(room, gen)
	return nil
}

// drainWaiting orders, in turn, what was published into a room held here
// while it loaded; new publishes queue behind them until none is left.
func (b *NATS) drainWaiting(room string, gen uint64) {
	for {
		p, from, ok := b.st.nextWaiting(room, gen)
		if !ok {
			return
		}
		seq, ok := b.h.PublishOwned(p, from, b.keep)
		if !ok {
			b.giveUp(p)
			continue
		}
		b.h.Settled(p, seq, nil)
	}
}

// askFollow asks holder for room's snapshot: it comes on this node's
// subject before the room's messages.
func (b *NATS) askFollow(room string, gen uint64, holder string) {
	if b.st.setOwner(room, gen, holder) {
		b.request(room, "f", roomKey(room), nil)
	}
}

// sendForward queues a registered forward for its room's owner, in the
// next round to the owner's node: the forwards of a round go in one
// message, as on Redis.
func (b *NATS) sendForward(fw *natsForward) {
	b.out.add(fw.owner, func(q []byte) []byte { return appendForwardRec(q, fw.id, fw.p) })
}

// takeOver ends the stream of a room whose holder is dead: a new epoch,
// marked on its history (the dead holder's writes fail after it), and
// every node with the room told to load it anew.
func (b *NATS) takeOver(ctx context.Context, room, dead string) error {
	rec, err := b.rooms.takeOver(ctx, room, dead, NewEpoch)
	if err == errRoomMoved {
		return nil // moved on meanwhile: read it again
	}
	if err != nil {
		return err
	}
	if _, err := b.hist.mark(ctx, room, rec.epoch); err != nil {
		return err
	}
	b.count.takeovers.Add(1)
	b.log.Info("NATS broker: took a room over from a dead node", "room", room, "node", dead)
	m := nats.NewMsg(b.roomSubject(room))
	m.Header.Set(natsKindHeader, natsKindTakeover)
	m.Data = []byte(rec.epoch)
	if err := b.nc.PublishMsg(m); err != nil {
		return err
	}
	return nil
}

// Room subject messages: what kind (a header).
const (
	natsKindHeader   = "Scalechat-Kind"
	natsKindTakeover = "T" // data: the new epoch
	natsKindPresence = "P"
)

// roomLoop reads the room subjects: takeovers and presence.
func (b *NATS) roomLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-b.roomCh:
			room, err := roomOfKey(strings.TrimPrefix(m.Subject, b.cfg.Prefix+".room."))
			if err != nil {
				continue
			}
			switch m.Header.Get(natsKindHeader) {
			case natsKindTakeover:
				b.onTakeover(room, string(m.Data))
			case natsKindPresence:
				b.pres.onMsg(b, room, m.Data)
			}
		}
	}
}

// onTakeover drops the room here unless it is loading (its load reads the
// new record) or already in the new epoch.
func (b *NATS) onTakeover(room, epoch string) {
	if b.st.takenOver(room, epoch) {
		b.lostRoom(room, "taken over from its dead owner")
	}
}

// forwardLoop gives up the forwards their owners did not answer in time.
func (b *NATS) forwardLoop(ctx context.Context) {
	t := time.NewTicker(natsForwardWait / 8)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.giveUpForwards(time.Now().Add(time.Hour))
			return
		case now := <-t.C:
			b.giveUpForwards(now)
		}
	}
}

func (b *NATS) giveUpForwards(now time.Time) {
	late, drain := b.st.lateForwards(now, natsForwardWait)
	for _, fw := range late {
		b.giveUp(fw.p)
	}
	// A snapshot asked for may be lost without a word (a NATS cluster
	// that lost a server may route the request to where nobody is, and
	// say no "no responders"): ask again, and drop a room that waited
	// too long; a publish that waited for its room as long as a forward
	// does is given up.
	ask, drop, waited := b.st.sweep(now, natsForwardWait)
	for _, room := range ask {
		b.request(room, "f", roomKey(room), nil)
	}
	for _, p := range waited {
		b.giveUp(p)
	}
	for _, room := range drop {
		b.wg.Go(func() { b.lostRoom(room, "its owner did not send its snapshot") })
	}
	for _, fw := range drain {
		b.wg.Go(func() { b.drainWaiting(fw.p.Room, fw.gen) })
	}
}

// receive reads what arrives on this node's subject: other nodes' rounds,
// and the server's no responders to this node's requests.
func (b *NATS) receive(m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, b.cfg.Prefix+".node."+b.id+".")
	if rest == "m" {
		b.receiveRound(m.Data)
		return
	}
	if m.Header.Get("Status") != "503" {
		return // answers come in rounds; only the server's "no responders" comes here
	}
	kind, tail, _ := strings.Cut(rest, ".")
	switch kind {
	case "r":
		b.nodeUnheard(tail)
	case "f":
		if room, err := roomOfKey(tail); err == nil {
			b.ownerGone(room)
		}
	}
}

// nodeUnheard: a round to node reached nobody (its connection is gone):
// the forwards on their way to it are given up, and the holders of their
// rooms looked at.
func (b *NATS) nodeUnheard(node string) {
	fws, drain := b.st.forwardsTo(node)
	rooms := map[string]bool{}
	for _, fw := range fws {
		b.giveUp(fw.p)
		rooms[fw.p.Room] = true
	}
	for _, fw := range drain {
		b.wg.Go(func() { b.drainWaiting(fw.p.Room, fw.gen) })
	}
	for room := range rooms {
		b.ownerGone(room)
	}
}

// ownerGone looks at the holder of a room whose owner did not take a
// request: a loading room loads again; a followed one whose holder's lease
// ended is taken over (and loads anew).
func (b *NATS) ownerGone(room string) {
	gen, loading, owner, ok := b.st.follower(room)
	if !ok {
		return
	}
	b.wg.Go(func() {
		ctx := b.runCtx()
		if loading {
			sleepCtx(ctx, natsRetry)
			b.load(room, gen)
			return
		}
		alive, err := b.lease.alive(ctx, owner)
		if err != nil || alive {
			// Its connection comes back, or will: forwards meanwhile are
			// given up; a room waiting for its snapshot asks again.
			if sleepCtx(ctx, 5*natsRetry) && b.st.resyncing(room, gen) {
				b.request(room, "f", roomKey(room), nil)
			}
			return
		}
		if err := b.takeOver(ctx, room, owner); err != nil {
			b.failed("take a room over", err)
		}
	})
}

// lostRounds: messages to this node may have been dropped (a slow
// consumer, or a reconnection): every room it follows or loads asks its
// owner for the snapshot again, and catches up from it (or is dropped,
// when the owner no longer has what it missed).
func (b *NATS) lostRounds() {
	b.count.gaps.Add(1)
	for _, room := range b.st.resyncAll() {
		b.request(room, "f", roomKey(room), nil)
	}
}
