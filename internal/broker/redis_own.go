package broker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Room ownership: the node-local fast path of a cluster.
//
// A room whose only subscriber is one node is owned by that node: its
// messages are ordered, stored in the room's history and delivered on that
// node at once, and written to Redis afterwards (the room's stream and seq,
// one pipeline per round), so that Redis is off the message's path. A room
// whose members are on several nodes is ordered by Redis, as before.
//
//   - Getting it. The publish script grants the room to the publishing node
//     when nobody holds it and the node is the only subscriber of its
//     channel (PUBSUB NUMSUB, or SHARDNUMSUB on a Redis Cluster). The node
//     orders messages itself once every seq Redis handed out before came
//     back on its channel.
//   - Keys. holder names the owning node (no lease: it says whose the
//     stream is); lease lives while the owner writes (ownLease), and tells
//     others the owner is alive.
//   - Giving it up. A node that loads a held room publishes "H" on the
//     room's channel and waits. The owner stops ordering (Disown), writes
//     what it ordered, deletes holder and lease, raises the seq counter to
//     its last seq and publishes "R"; the new node then loads the room from
//     Redis as any other. A node also releases the rooms it frees.
//   - Failure. When no "R" comes within a second and the lease is gone (the
//     owner died, or stalls), the new node takes the room over: the room's
//     epoch changes, so clients that resume with the old one get a reset
//     and the history Redis holds, never a seq that means something else.
//     It publishes "T"; an owner that comes back (or whose write is
//     refused) drops the room: its members are closed with 1012 and rejoin
//     the new stream.
//
// docs/architecture.md says what each failure costs.

const (
	// ownLease is how long a room's lease lives after the owner's last write.
	ownLease = 3 * time.Second
	// ownMargin is how long before the lease ends in Redis that the owner
	// stops ordering, for the time its write took to get there.
	ownMargin = time.Second
	// releaseWait is how long a node waits for an owner's "R" before it
	// checks the lease.
	releaseWait = time.Second
)

// publishScript gives a message its seq, stores it and publishes it, and
// keeps the room's epoch alive as long as its seq; it grants the room to
// the publishing node when that node alone subscribes to it.
// KEYS: seq, history, epoch, holder, lease. ARGV: prefix, suffix, history
// size, TTL in seconds, channel, "s" to publish on a shard channel, node,
// lease in ms. Returns {seq, 1 when the node owns the room}.
var publishScript = redis.NewScript(`
local seq = redis.call('INCR', KEYS[1])
local msg = ARGV[1] .. seq .. ARGV[2]
if tonumber(ARGV[3]) > 0 then
  redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], seq .. '-1', 'm', msg)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[4])
local sub = 'NUMSUB'
if ARGV[6] == 's' then
  sub = 'SHARDNUMSUB'
  redis.call('SPUBLISH', ARGV[5], seq .. ' ' .. msg)
else
  redis.call('PUBLISH', ARGV[5], seq .. ' ' .. msg)
end
local holder = redis.call('GET', KEYS[4])
local own = 0
if holder == ARGV[7] then
  own = 1
elseif not holder and redis.call('PUBSUB', sub, ARGV[5])[2] == 1 then
  redis.call('SET', KEYS[4], ARGV[7], 'EX', ARGV[4])
  own = 1
end
if own == 1 then
  redis.call('SET', KEYS[5], ARGV[7], 'PX', ARGV[8])
end
return {seq, own}
`)

// persistScript stores messages an owner ordered, raises the seq counter
// to the last, and renews the owner's lease; it refuses (0) when another
// node took the room over.
// KEYS: as publishScript. ARGV: node, lease in ms, history size, TTL in
// seconds, channel, mode, then seq and message of each.
var persistScript = redis.NewScript(`
local holder = redis.call('GET', KEYS[4])
if holder ~= ARGV[1] then
  local sub = 'NUMSUB'
  if ARGV[6] == 's' then sub = 'SHARDNUMSUB' end
  if holder or redis.call('PUBSUB', sub, ARGV[5])[2] ~= 1 then
    return 0
  end
  redis.call('SET', KEYS[4], ARGV[1], 'EX', ARGV[4]) -- Redis lost the keys: still ours alone
end
local last = 0
for i = 7, #ARGV, 2 do
  if tonumber(ARGV[3]) > 0 then
    redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], ARGV[i] .. '-1', 'm', ARGV[i+1])
  end
  last = tonumber(ARGV[i])
end
if last > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], last)
end
for k = 1, 4 do redis.call('EXPIRE', KEYS[k], ARGV[4]) end
redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[2])
return 1
`)

// releaseScript gives up a room: the seq counter at least the owner's last
// seq, holder and lease deleted, and "R" published for the node waiting.
// KEYS: as publishScript. ARGV: node, last seq, TTL in seconds, channel,
// mode.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[4]) == ARGV[1] then
  redis.call('DEL', KEYS[4], KEYS[5])
  if tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[1]) or '0') then
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  end
end
if ARGV[5] == 's' then
  redis.call('SPUBLISH', ARGV[4], 'R')
else
  redis.call('PUBLISH', ARGV[4], 'R')
end
return 1
`)

// takeoverScript takes a room over from a holder whose lease is gone: a
// new epoch, no holder. 0: the lease lives, wait.
// KEYS: as publishScript. ARGV: the holder seen, new epoch, TTL in seconds.
var takeoverScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[5]) == 1 then
  return 0
end
if redis.call('GET', KEYS[4]) == ARGV[1] then
  redis.call('DEL', KEYS[4])
  redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[3])
end
return 1
`)

var scripts = []*redis.Script{publishScript, persistScript, releaseScript, takeoverScript, raiseScript}

func (b *Redis) holderKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:holder" }
func (b *Redis) leaseKey(room string) string  { return b.cfg.Prefix + ":{" + room + "}:lease" }

// owns records that Redis granted this node the room, whose seqs up to
// from were handed out by Redis.
func (b *Redis) owns(room string, from uint64, sent time.Time) {
	b.ownMu.Lock()
	b.held[room] = true
	b.ownMu.Unlock()
	b.h.Own(room, from, sent.Add(ownLease-ownMargin))
}

// release gives up the room: after the writes already queued, so Redis's
// seq is the room's last.
func (b *Redis) release(room string, seq uint64) {
	b.ownMu.Lock()
	held := b.held[room]
	delete(b.held, room)
	b.ownMu.Unlock()
	if held {
		b.releases.Add(1)
		b.queue(job{kind: jobRelease, room: room, e: Entry{Seq: seq}})
	}
}

// lostRoom handles a room another node took over while this one thought it
// held it: the room is dropped here (its members rejoin the new stream).
func (b *Redis) lostRoom(room string) {
	b.ownMu.Lock()
	delete(b.held, room)
	b.ownMu.Unlock()
	b.h.Disown(room)
	if b.h.Drop(room) {
		b.dropped.Add(1)
		b.log.Warn("room taken over by another node: its members rejoin", "room", room)
		b.Unsubscribe(room)
	}
}

// onControl handles the control messages of a room's channel.
func (b *Redis) onControl(ctx context.Context, name, payload string) {
	switch payload {
	case "H": // a node wants the room
		if seq, owned := b.h.Disown(name); owned {
			b.release(name, seq)
		}
	case "R": // the owner released the room
		b.subMu.Lock()
		w := b.awaiting[name]
		b.subMu.Unlock()
		if w != nil {
			signal(w)
		}
	case "T": // taken over: an owner that missed it is no longer one
		b.ownMu.Lock()
		held := b.held[name]
		b.ownMu.Unlock()
		if held {
			b.lostRoom(name)
		}
	}
}

// awaitRelease waits until the room's holder released it (or lost it), then
// loads the room. It runs on its own goroutine, one per room waiting.
func (b *Redis) awaitRelease(ctx context.Context, name, holder string, st *roomState) {
	w := make(chan struct{}, 1)
	b.subMu.Lock()
	b.awaiting[name] = w
	b.subMu.Unlock()
	defer func() {
		b.subMu.Lock()
		if b.awaiting[name] == w {
			delete(b.awaiting, name)
		}
		b.subMu.Unlock()
	}()
	ttl := int(b.cfg.TTL / time.Second)
	for ctx.Err() == nil {
		if err := b.publishControl(ctx, name, "H"); err != nil {
			b.fail("ask for a room", err)
		}
		t := time.NewTimer(releaseWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w:
			t.Stop()
			b.load(ctx, map[string]*roomState{name: st})
			return
		case <-t.C:
		}
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		took, err := takeoverScript.Run(c, b.rdb, b.publishKeys(name), holder, NewEpoch(), ttl).Int64()
		cancel()
		if err != nil {
			b.fail("take a room over", err)
			continue
		}
		if took == 1 {
			b.takeovers.Add(1)
			b.log.Warn("room taken over from a node that did not answer", "room", name, "holder", holder)
			if err := b.publishControl(ctx, name, "T"); err != nil {
				b.fail("take a room over", err)
			}
			b.load(ctx, map[string]*roomState{name: st})
			return
		}
	}
}

func (b *Redis) publishControl(ctx context.Context, name, msg string) error {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if b.cluster != nil {
		return b.rdb.SPublish(c, b.channel(name), msg).Err()
	}
	return b.rdb.Publish(c, b.channel(name), msg).Err()
}

// isSeq reports whether a channel message is a chat message ("seq json"),
// not a control message.
func isSeq(payload string) bool { return payload != "" && payload[0] >= '0' && payload[0] <= '9' }
