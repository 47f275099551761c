package broker

import (
	"context"
	"errors"
	"slices"
	"strings"
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

// publishScript gives each of a batch of messages its seq, stores it and
// publishes it, and keeps the room's keys alive as long as its seq; it
// grants a room to the publishing node when that node alone subscribes to
// it. A batch is what one round of a node holds for one Redis (for one hash
// slot of a Redis Cluster), at most maxPublishBatch: one script call instead
// of one a message. Each message runs as if alone, in the batch's order.
// The keys' TTLs are renewed only when the node asks ("1", at most every
// quarter TTL per room: renewDue, which passes the TTL and a quarter more)
// or the counter is new: four EXPIREs a message were a third of the
// script's Redis CPU.
// KEYS: per message seq, history, epoch, holder, the set of nodes that
// loaded the room. ARGV: history size, TTL in seconds, "s" to publish on a
// shard channel, node, then per message prefix, suffix, channel, "1" to
// renew the TTLs. Returns per message seq and 1 when the node owns the
// room, or 0 and -1, without publishing, when another node holds it.
var publishScript = redis.NewScript(`
local node, ttl = ARGV[4], ARGV[2]
local hist = tonumber(ARGV[1])
local res = {}
for m = 0, #KEYS / 5 - 1 do
  local k, a = m * 5, 5 + m * 4
  local holder = redis.call('GET', KEYS[k+4])
  if holder and holder ~= node then
    res[#res+1] = 0 -- another node orders this room: not here
    res[#res+1] = -1
  else
    local seq = redis.call('INCR', KEYS[k+1])
    local s = tostring(seq)
    local msg = ARGV[a] .. s .. ARGV[a+1]
    local renew = ARGV[a+3] == '1' or seq == 1
    if hist > 0 then
      redis.call('XADD', KEYS[k+2], 'MAXLEN', ARGV[1], s .. '-1', 'm', msg)
      if renew then redis.call('EXPIRE', KEYS[k+2], ttl) end
    end
    if renew then
      redis.call('EXPIRE', KEYS[k+1], ttl)
      redis.call('EXPIRE', KEYS[k+3], ttl)
      redis.call('EXPIRE', KEYS[k+5], ttl)
    end
    if ARGV[3] == 's' then
      redis.call('SPUBLISH', ARGV[a+2], s .. ' ' .. msg)
    else
      redis.call('PUBLISH', ARGV[a+2], s .. ' ' .. msg)
    end
    local own = 0
    if holder == node then
      own = 1
    elseif not holder and redis.call('SCARD', KEYS[k+5]) == 1 and redis.call('SISMEMBER', KEYS[k+5], node) == 1 then
      redis.call('SET', KEYS[k+4], node, 'EX', ttl)
      own = 1
    end
    res[#res+1] = seq
    res[#res+1] = own
  end
end
return res
`)

// maxPublishBatch bounds the messages of one publishScript call: Redis
// serves nothing else while a script runs.
const maxPublishBatch = 64

// persistScript stores messages an owner ordered and raises the seq
// counter to the last; it refuses (0) when another node took the room over.
// KEYS: as publishScript. ARGV: node, history size, TTL in seconds, then seq
// and message of each.
var persistScript = redis.NewScript(`
local holder = redis.call('GET', KEYS[4])
if holder ~= ARGV[1] then
  if holder or redis.call('SCARD', KEYS[5]) ~= 1 or redis.call('SISMEMBER', KEYS[5], ARGV[1]) ~= 1 then
    return 0
  end
  redis.call('SET', KEYS[4], ARGV[1], 'EX', ARGV[3]) -- Redis lost the keys: still ours alone
end
local last = 0
for i = 4, #ARGV, 2 do
  if tonumber(ARGV[2]) > 0 then
    redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[2], ARGV[i] .. '-1', 'm', ARGV[i+1])
  end
  last = tonumber(ARGV[i])
end
if last > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], last)
end
for k = 1, 5 do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
return 1
`)

// releaseScript gives up a room: the seq counter at least the owner's last
// seq, holder and lease deleted, and "R" published for the node waiting.
// It returns 0 when the node no longer held the room: it was taken over.
// KEYS: as publishScript. ARGV: node, last seq, TTL in seconds, channel,
// mode.
var releaseScript = redis.NewScript(`
local held = 0
if redis.call('GET', KEYS[4]) == ARGV[1] then
  held = 1
  redis.call('DEL', KEYS[4])
  if tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[1]) or '0') then
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  end
end
if ARGV[5] == 's' then
  redis.call('SPUBLISH', ARGV[4], 'R')
else
  redis.call('PUBLISH', ARGV[4], 'R')
end
return held
`)

// takeoverScript takes a room over from a holder whose lease is gone (the
// caller checked): a new epoch, no holder.
// KEYS: as publishScript. ARGV: the holder seen, new epoch, TTL in seconds.
var takeoverScript = redis.NewScript(`
if redis.call('GET', KEYS[4]) == ARGV[1] then
  redis.call('DEL', KEYS[4])
  redis.call('SREM', KEYS[5], ARGV[1])
  redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[3])
end
return 1
`)

var scripts = []*redis.Script{publishScript, persistScript, releaseScript, takeoverScript, streamScript, presenceScript}

func (b *Redis) holderKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:holder" }

// roomNodesKey is the set of nodes that loaded the room.
func (b *Redis) roomNodesKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:nodes" }

// leaseKey is a node's lease: while it lives, the rooms the node holds are
// its own.
func (b *Redis) leaseKey(node string) string { return b.cfg.Prefix + ":node:" + node + ":lease" }

// owns records that Redis granted this node the room, whose seqs up to
// from were handed out by Redis.
func (b *Redis) owns(room string, from uint64) {
	b.subMu.Lock()
	st := b.rooms[room]
	subscribed := st != nil && !st.leaving
	b.subMu.Unlock()
	b.ownMu.Lock()
	b.held[room] = true
	b.ownMu.Unlock()
	if !subscribed { // freed while the grant was on its way: give it back
		b.release(room, 0)
		return
	}
	b.h.Own(room, from)
}

// holds reports whether Redis granted this node the room and it has not
// given it up.
func (b *Redis) holds(room string) bool {
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	return b.held[room]
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
	if strings.HasPrefix(payload, "P") {
		b.onPresence(name, payload)
		return
	}
	switch payload {
	case "H": // a node wants the room
		if seq, owned := b.h.Disown(name); owned {
			b.release(name, seq)
		}
	case "R": // the owner released the room
		b.subMu.Lock()
		for _, w := range b.awaiting[name] {
			signal(w)
		}
		b.subMu.Unlock()
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
	b.awaitHolder(ctx, name, holder, func(bool) { b.load(ctx, map[string]*roomState{name: st}) })
}

// awaitHolder asks the room's holder to release it and waits until it did,
// or until the room is taken over from a holder that does not answer; then
// calls done, telling whether it took the room over.
func (b *Redis) awaitHolder(ctx context.Context, name, holder string, done func(tookOver bool)) {
	// The room's load and its held publishes may wait at once: each has
	// its own channel.
	w := make(chan struct{}, 1)
	b.subMu.Lock()
	b.awaiting[name] = append(b.awaiting[name], w)
	b.subMu.Unlock()
	defer func() {
		b.subMu.Lock()
		ws := slices.DeleteFunc(b.awaiting[name], func(x chan struct{}) bool { return x == w })
		if len(ws) == 0 {
			delete(b.awaiting, name)
		} else {
			b.awaiting[name] = ws
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
		case now == "" || now == b.id:
			cancel()
			done(false)
			return
		case now != holder:
			holder = now // another node took it meanwhile: ask that one
			cancel()
			continue
		}
		alive, err := b.rdb.Exists(c, b.leaseKey(holder)).Result()
		if err == nil && alive == 1 {
			// A live holder that does not answer may hold a room it no
			// longer listens to: then this node is the room's only
			// subscriber.
			var subs int64
			subs, err = b.subscribers(c, name)
			if subs <= 1 {
				alive = 0
			}
		}
		var took int64
		if err == nil && alive == 0 {
			took, err = takeoverScript.Run(c, b.rdb, b.publishKeys(name), holder, NewEpoch(), ttl).Int64()
		}
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
	b.ownMu.Lock()
	q, waiting := b.blocked[name]
	if p != nil {
		q = append(q, *p)
	}
	b.blocked[name] = q
	b.nBlocked.Store(int64(len(b.blocked)))
	b.ownMu.Unlock()
	if waiting {
		return
	}
	b.blockedRooms.Add(1)
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
				if b.h.Drop(name) {
					b.dropped.Add(1)
					b.Unsubscribe(name)
				}
			} else {
				b.catchUp(ctx, name)
			}
			// The held publishes go out ahead of any that comes once the
			// room is no longer blocked: queued before ownMu is let go.
			b.ownMu.Lock()
			q := b.blocked[name]
			delete(b.blocked, name)
			b.nBlocked.Store(int64(len(b.blocked)))
			b.pubMu.Lock()
			for _, p := range q {
				b.pending = append(b.pending, job{kind: jobPublish, p: p})
			}
			b.pubMu.Unlock()
			b.ownMu.Unlock()
			signal(b.pubWake)
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
func (b *Redis) blockedPublish(p Publication) bool {
	if b.nBlocked.Load() == 0 {
		return false
	}
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	q, ok := b.blocked[p.Room]
	if ok {
		b.blocked[p.Room] = append(q, p)
	}
	return ok
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

// leaseLoop keeps this node's lease alive in Redis. A renewal that comes
// after the lease lapsed (the node was stopped, or could not reach Redis)
// first checks which of the rooms it held are still its own.
func (b *Redis) leaseLoop(ctx context.Context) {
	t := time.NewTicker(nodeLease / 3)
	defer t.Stop()
	var until time.Time
	for {
		if b.up.Load() && !b.recovering.Load() {
			sent := time.Now()
			c, cancel := context.WithTimeout(ctx, time.Second)
			err := b.rdb.Set(c, b.leaseKey(b.id), "1", nodeLease).Err()
			cancel()
			switch {
			case err != nil:
				if ctx.Err() == nil {
					b.fail("renew the node's lease", err)
				}
			case sent.After(until) && !b.verifyHeld(ctx):
			default:
				until = sent.Add(nodeLease - leaseMargin)
				b.setLease(until)
				b.checkPeers(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.leaseWake:
		}
	}
}

// verifyHeld checks the rooms this node holds against Redis: those another
// node took over are dropped, the others' waiting joiners go on. It reports
// whether Redis answered.
func (b *Redis) verifyHeld(ctx context.Context) bool {
	b.ownMu.Lock()
	rooms := make([]string, 0, len(b.held))
	for r := range b.held {
		rooms = append(rooms, r)
	}
	b.ownMu.Unlock()
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

// setLease says until when this node's held rooms are its own, to the
// rooms and to the receiving side.
func (b *Redis) setLease(until time.Time) {
	b.leaseUntil.Store(until.UnixNano())
	b.h.Lease(until)
}

// leaseLapsed reports whether this node's lease lapsed (it was stopped):
// rooms it held may have been taken over.
func (b *Redis) leaseLapsed() bool { return time.Now().UnixNano() >= b.leaseUntil.Load() }
