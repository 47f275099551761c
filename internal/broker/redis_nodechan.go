package broker

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node's channel: the owner protocol's records other nodes send this
// one (redis_followwire.go), a round's records from one node in one
// PUBLISH (SPUBLISH on a Redis Cluster), read on the same connection as the
// rooms' channels, which carry their control messages.

// record is one message of a followed room, as its owner sent it.
type record struct {
	room string
	seq  uint64
	json string // the message, seq included; a substring of the payload
}

// lenPrefixed splits "<n>:<n bytes><rest>" into its n bytes and rest.
func lenPrefixed(s string) (field, rest string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return "", "", false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n < 0 || n > len(s)-i-1 {
		return "", "", false
	}
	return s[i+1 : i+1+n], s[i+1+n:], true
}

// deliverRecords delivers the messages of a run of an owner's records in
// order, filling any gap from its room's stream.
func (b *Redis) deliverRecords(ctx context.Context, recs []record) {
	if len(recs) == 0 {
		return
	}
	b.count.received.Add(uint64(len(recs)))
	if b.lease.lapsed() {
		for _, r := range recs {
			if b.holds(r.room) {
				// Woken after its lease lapsed, this node may have lost
				// the room: a message of another stream must not reach
				// its members.
				b.verifyHeld(ctx)
				break
			}
		}
	}
	b.fillMu.Lock()
	defer b.fillMu.Unlock()
	run := make([]Delivered, 0, len(recs))
	for _, r := range recs {
		if cur, loaded := b.seqBefore(r.room, run); loaded && r.seq > cur+1 {
			b.h.DeliverMany(run) // what came before the gap, first
			run = run[:0]
			if !b.fill(ctx, r.room, cur, r.seq-1) {
				continue // the room is dropped: its members resume and are told
			}
		}
		run = append(run, Delivered{Room: r.room, Seq: r.seq, Payload: []byte(r.json)})
	}
	if len(run) > 0 {
		b.h.DeliverMany(run)
	}
}

// seqBefore is the room's seq once run is delivered: its last message in
// run, else the handler's (and whether the room is loaded here).
func (b *Redis) seqBefore(room string, run []Delivered) (uint64, bool) {
	for i := len(run) - 1; i >= 0; i-- {
		if run[i].Room == room {
			return run[i].Seq, true
		}
	}
	_, seq, loaded := b.h.Position(room)
	return seq, loaded
}

// rejoin puts this node back into the set of nodes of every room it loaded,
// after its lease lapsed: its peers may have taken it out meanwhile
// (checkPeers). Each room it does not hold then catches up from its stream
// what Redis holds beyond its seq (with an owner, whose writes lag, rarely
// anything: the owner's records reach a follower whatever the set says). It reports whether Redis
// answered.
func (b *Redis) rejoin(ctx context.Context) bool {
	rooms := b.sub.synced()
	if len(rooms) == 0 {
		return true
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	seqs := make([]*redis.StringCmd, len(rooms))
	cmds, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for i, name := range rooms {
			p.SAdd(c, b.roomNodesKey(name), b.id)
			p.Expire(c, b.roomNodesKey(name), b.setTTL(name))
			seqs[i] = p.Get(c, b.seqKey(name)) // after the SADD: covers every message not sent here
		}
		return nil
	})
	if err := pipelineErr(cmds, err); err != nil {
		b.fail("rejoin the rooms' sets of nodes", err)
		return false
	}
	b.fillMu.Lock()
	defer b.fillMu.Unlock()
	for i, name := range rooms {
		seq, _ := seqs[i].Uint64()
		if _, cur, loaded := b.h.Position(name); loaded && seq > cur && !b.holds(name) {
			b.fill(ctx, name, cur, seq)
		}
	}
	return true
}

// setTTL is the TTL a node gives a room's set of nodes when it joins it
// alone (without the room's other keys): the longest any script gives the
// room's counter, so that the set never expires before the counter. A room
// whose counter lives on without its set would have its messages sent to
// no node at all.
func (b *Redis) setTTL(room string) time.Duration {
	rc := b.roomConfigOf(room)
	return rc.TTL + renewInterval(rc.TTL)
}
