package broker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Loading a room: its seq, epoch, history tail and presence read from
// Redis in one pipeline once its subscription is confirmed, and the room
// claimed, or its owner followed (redis_follow.go).

// load waits for the subscriptions of rooms to be confirmed (so no message
// falls between the history read and the channel), then reads each room's
// seq and history tail in one pipeline. Without Redis, rooms load empty and
// unsynced: members join, their messages are refused until Redis is back,
// and the room is then dropped so that they resume into Redis's stream.
func (b *Redis) load(ctx context.Context, rooms map[string]*roomState) {
	ok := b.health.up.Load()
	if ok {
		timeout := time.After(2 * time.Second)
		waits := b.sub.confirmations(rooms)
	wait:
		for _, w := range waits {
			select {
			case <-w:
			case <-timeout:
				ok = false
				break wait
			case <-ctx.Done():
				return
			}
		}
	}
	type read struct {
		made     *redis.BoolCmd // the epoch was made by this load: a new stream
		newEpoch string
		seq      *redis.StringCmd
		epoch    *redis.StringCmd
		holder   *redis.StringCmd
		presence *redis.MapStringStringCmd
		tail     *redis.XMessageSliceCmd
	}
	reads := map[string]read{}
	if ok {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		cmds, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
			for name := range rooms {
				// The first node to load the room makes its epoch; every
				// other one reads it. Each joins the room's nodes first.
				rc := rooms[name].rc
				p.SAdd(c, b.roomNodesKey(name), b.id)
				p.Expire(c, b.roomNodesKey(name), rc.TTL+renewInterval(rc.TTL))
				epoch := NewEpoch()
				made := p.SetNX(c, b.epochKey(name), epoch, rc.TTL)
				// Renewed here and while loaded (keepAliveLoop): the
				// counter must not expire under the node's members.
				p.Expire(c, b.seqKey(name), rc.TTL+renewInterval(rc.TTL))
				p.Expire(c, b.epochKey(name), rc.TTL+renewInterval(rc.TTL))
				// The first node to load the room owns it; claimed before
				// the counter is read, which no other node raises from
				// then on but by handing the room over.
				p.SetNX(c, b.holderKey(name), b.id, rc.TTL+renewInterval(rc.TTL))
				r := read{made: made, newEpoch: epoch,
					seq: p.Get(c, b.seqKey(name)), epoch: p.Get(c, b.epochKey(name)), holder: p.Get(c, b.holderKey(name)),
					presence: p.HGetAll(c, b.presenceKey(name))}
				if rc.History > 0 {
					r.tail = p.XRevRangeN(c, b.historyKey(name), "+", "-", int64(rc.History))
				}
				reads[name] = r
			}
			return nil
		})
		cancel()
		if err := pipelineErr(cmds, err); err != nil {
			b.fail("load rooms", err)
			ok = false
		}
	}
	if ok {
		made := map[string]string{}
		for name, r := range reads {
			if r.made.Val() {
				made[name] = r.newEpoch
			}
		}
		b.announceNewStreams(ctx, made)
	}
	for name, st := range rooms {
		if !ok {
			b.sub.markUnsynced(st)
			b.h.Loaded(name, NewEpoch(), 0, nil) // an island of this node: a stream of its own
			continue
		}
		r := reads[name]
		if holder := r.holder.Val(); holder != "" && holder != b.id {
			// Owned by another node: this one follows it (redis_follow.go).
			b.loadPresence(name, r.presence.Val())
			b.waitWG.Go(func() { b.followRoom(ctx, name, holder, st) })
			continue
		}
		seq, _ := r.seq.Uint64() // redis.Nil: a new room, seq 0
		// When still subscribed: its keys, renewed by the load, are kept alive from here.
		b.sub.keepAlive(name, st)
		var tail []Entry
		if r.tail != nil {
			tail = latest(r.tail.Val(), rooms[name].rc.History)
		}
		b.h.Loaded(name, r.epoch.Val(), seq, tail)
		b.loadPresence(name, r.presence.Val())
		if r.holder.Val() == b.id {
			b.owns(name, seq)
		}
	}
}

// announceNewStreams publishes "E<epoch>" on the channel of each room
// whose epoch this node's load made (room → epoch): a new room, or one
// whose keys expired or were flushed while other nodes kept it loaded with
// seqs the new stream hands out again. Those drop it (onNewStream); a node
// with the same epoch, or without the room, does nothing. One pipeline.
func (b *Redis) announceNewStreams(ctx context.Context, made map[string]string) {
	if len(made) == 0 {
		return
	}
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cmds, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for name, epoch := range made {
			b.controlCmd(c, p, name, "E"+epoch)
		}
		return nil
	})
	if err := pipelineErr(cmds, err); err != nil && ctx.Err() == nil {
		b.fail("announce new streams", err)
	}
}
