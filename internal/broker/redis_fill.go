package broker

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A room another node follows is held twice: by its owner, which writes it
// to Redis behind (Config.FollowedLinger, up to a second), and by each
// follower, which got every message the owner ordered. When the owner is
// gone before its write (unheard: killed; or its lease ended: stopped, cut
// off), a follower that drops the room writes what Redis lacks of it
// (lua/fill.lua): history outlives the owner unless its followers go with
// it.

// fillJob is what a follower held of a room whose owner is gone: the
// room's epoch here and its messages in seq order.
type fillJob struct {
	epoch string
	tail  []Entry
}

// fillFrom returns a Hub.Drop keep that queues the messages a dropped
// followed room held, to be written behind its gone owner. It runs under
// the room's order; the publisher's lock is a leaf.
func (b *Redis) fillFrom(room string) func(epoch string, seq uint64, tail []Entry) {
	if b.roomConfigOf(room).History == 0 {
		return nil // no history kept: nothing to write
	}
	return func(epoch string, _ uint64, tail []Entry) {
		if len(tail) > 0 && epoch != "" {
			b.pub.queue(job{kind: jobFill, room: room, fill: &fillJob{epoch: epoch, tail: tail}})
		}
	}
}

// fillCmd queues the fill.lua call of the job j.
func (b *Redis) fillCmd(ctx context.Context, p redis.Pipeliner, j job) redis.Cmder {
	args := make([]any, 0, 2+2*len(j.fill.tail))
	args = append(args, j.fill.epoch, strconv.Itoa(b.roomConfigOf(j.room).History))
	for _, e := range j.fill.tail {
		args = append(args, e.Seq, e.Payload)
	}
	return fillScript.EvalSha(ctx, p, []string{b.seqKey(j.room), b.historyKey(j.room), b.epochKey(j.room)}, args...)
}

// settleFill logs what a fill wrote, or why it failed: a failure loses
// nothing the owner did not already risk, and says nothing of Redis's
// health.
func (b *Redis) settleFill(j job, r reply) {
	if r.err != nil {
		b.log.Warn("a gone owner's messages held here could not be written to Redis", "room", j.room, "err", r.err)
		return
	}
	if r.n > 0 {
		b.log.Info("wrote a gone owner's messages held here to Redis", "room", j.room, "messages", r.n)
	}
}
