package broker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node's channel (one Redis): publishScript sends each node, once per
// call, every message of the call whose room the node loaded, in one
// payload of records <len(room)>:<room><seq>:<len(json)>:<json>. The
// records of one room come in its seq order, and those of every call in the
// order Redis ran the calls: the same order as on the room's channel, which
// the node still reads for the room's control messages (handover, presence)
// on the same connection.

// record is one message of a node's batch.
type record struct {
	room string
	seq  uint64
	json string // the message, seq included; a substring of the payload
}

// errBadBatch is a node's batch that does not split into records: a bug, or
// something else published on the node's channel.
var errBadBatch = errors.New("malformed batch on the node's channel")

// splitBatch cuts a node's batch into its records, appending them to recs.
// The records' strings share the payload's memory.
func splitBatch(payload string, recs []record) ([]record, error) {
	for s := payload; s != ""; {
		room, rest, ok := lenPrefixed(s)
		if !ok {
			return recs, errBadBatch
		}
		i := strings.IndexByte(rest, ':')
		if i <= 0 {
			return recs, errBadBatch
		}
		seq, err := strconv.ParseUint(rest[:i], 10, 64)
		if err != nil {
			return recs, errBadBatch
		}
		json, rest, ok := lenPrefixed(rest[i+1:])
		if !ok {
			return recs, errBadBatch
		}
		recs = append(recs, record{room: room, seq: seq, json: json})
		s = rest
	}
	return recs, nil
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

// onBatch delivers a batch from the node's channel: every record in order,
// each after any gap before it is filled from its room's stream, under one
// fillMu, in one DeliverMany for each run of records without a gap (all of
// them but where a node missed messages).
func (b *Redis) onBatch(ctx context.Context, payload string) {
	recs, err := splitBatch(payload, nil)
	if err != nil {
		b.count.errs.Add(1)
		b.log.Warn("a batch from Redis was dropped: its rooms fill the gap from their streams at their next message", "err", err, "bytes", len(payload))
	}
	b.deliverRecords(ctx, recs)
}

// deliverRecords delivers the messages of a batch (or of a run of an
// owner's records) in order, filling any gap from its room's stream.
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
	return b.h.Seq(room)
}

// rejoin puts this node back into the set of nodes of every room it loaded,
// after its lease lapsed: its peers may have taken it out meanwhile
// (checkPeers), and then Redis sent it none of those rooms' messages, and
// could grant another node a room whose members are here. Each room then
// catches up from its stream what it missed. It reports whether Redis
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
		if cur, loaded := b.h.Seq(name); loaded && seq > cur && !b.holds(name) {
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
