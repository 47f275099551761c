package broker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Publish implements Broker. It never blocks: a message of a room this node
// owns is ordered and delivered here at once, and stored in Redis in the
// background; any other goes to its room's owner (a follower's forward) or
// its holder of the moment (forwardToHolder). No script in Redis orders a
// message. While Redis is down, a room no other node follows goes on and
// any other refuses the message with ErrUnavailable: ordered here alone,
// its seq would name another message on the other nodes of the room.
func (b *Redis) Publish(p Publication) (uint64, error) {
	// Before Run has first tried Redis, publishes wait for it: ordered
	// here, their seqs would be taken again by Redis's order.
	if !b.health.up.Load() && b.health.started.Load() {
		var seq uint64
		var err error
		if b.health.whileDown(func() { seq, err = b.publishDown(p) }) {
			return seq, err
		}
	}
	// A room this node owns is refused past MaxWait only when it has
	// followers, whose messages would queue, or when the history writes
	// pile up (behind). Read once: a clock read a publish while anything
	// waits.
	over := b.overloaded()
	if over && len(b.own.followersOf(p.Room)) > 0 || b.behind() {
		return 0, b.refuseOverloaded(p)
	}
	if !b.own.isOut(p.Room) {
		if seq, ok := b.publishOwned(p); ok {
			return seq, nil
		}
	}
	if over {
		return 0, b.refuseOverloaded(p)
	}
	p.Prefix, p.Suffix = append([]byte(nil), p.Prefix...), append([]byte(nil), p.Suffix...)
	p.From = -1 // delivered from the broker's goroutine
	// Answered by the owner's ack, unsent or orderHere.
	fw := forward{p: p, tries: 1, ticket: b.own.sendOut(p.Room)}
	// Followed: to the owner. Else the room's holder of the moment orders
	// it, this node's room included (the room loading here, or owned but
	// not ordering yet).
	if !b.forwardPublish(fw) {
		b.forwardToHolder(b.runCtx(), fw)
	}
	return 0, nil
}

// overloaded reports whether the node's jobs bound for other nodes waited
// longer than Config.MaxWait: Redis (or this node's round to it) carries
// less than comes in, and a message queued now would wait at least that
// long. A room this node owns without followers is never refused: its
// members are all here, and only its history waits.
func (b *Redis) overloaded() bool {
	return b.cfg.MaxWait > 0 && b.pub.waited(unixNano) > b.cfg.MaxWait
}

// behind reports whether the history writes of owned rooms pending passed
// maxPendingWrites (with Config.MaxWait on): then every message is refused,
// a room this node owns alone too, whose writes are what piles up.
func (b *Redis) behind() bool {
	return b.cfg.MaxWait > 0 && b.pub.writes.Load() > maxPendingWrites
}

// refuseOverloaded refuses p (ErrOverloaded): nothing of it was sent.
func (b *Redis) refuseOverloaded(p Publication) error {
	b.count.overloaded.Add(1)
	return ErrOverloaded
}

func unixNano() int64 { return time.Now().UnixNano() }

// unsent gives up a publish forwarded to an owner that did not answer, or
// that never went out, and tells its sender (Handler.Settled): the owner
// may or may not have ordered it. It is not delivered here under a seq of
// this node's own, which could name another message on other nodes: if the
// owner ordered it, it arrives from the owner, and the sender gets both the
// refusal and the message; if the stream was lost, every member of the
// room is told (lostStream).
func (b *Redis) unsent(fw forward) {
	b.own.answered(fw.p.Room, fw.ticket)
	b.giveUp(fw.p)
}

// giveUp refuses p, whose decline by the room was answered already, and
// tells its sender.
func (b *Redis) giveUp(p Publication) {
	b.count.refused.Add(1)
	b.h.Settled(p, 0, ErrUnavailable)
}

// keep queues a message an owned room ordered, to be stored in Redis. The
// room calls it under its lock, so a room's messages queue in seq order.
// The payload is the room's frame's, which nobody changes.
func (b *Redis) keep(room string, e Entry) {
	b.count.ownedPublished.Add(1)
	followed := b.keepFollowed(room, e)
	full, sooner := b.pub.add(job{kind: jobPersist, room: room, e: e, followed: followed})
	switch {
	case followed || full:
		signal(b.pub.wake) // followers wait for it, or the held writes are many: within the publish linger
	case sooner:
		signal(b.pub.persistWake)
	}
}

// publishLoop sends pending jobs to Redis, all at once in one pipeline per
// round.
func (b *Redis) publishLoop(ctx context.Context) {
	var batch []job
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.pub.wake:
			// Gather the publishes of a fraction of a millisecond.
			if !linger(ctx, t, b.cfg.Linger, b.cfg.Linger, nil) {
				return
			}
		case <-b.pub.persistWake:
			// Only writes of owned rooms, already delivered: gather
			// them into one round until the first is due, unless a
			// publish comes, which waits no longer than its own linger.
			if !b.lingerHeld(ctx, t) {
				return
			}
		}
		if b.health.recovering.Load() {
			continue // healthLoop wakes this loop when the rooms caught up
		}
		// The wakes sent for the jobs this round takes are spent: left
		// in their channels, each would start a round with nothing in it.
		// A job queued from here on wakes the loop again (keep, queue).
		drain(b.pub.wake)
		drain(b.pub.persistWake)
		var held bool
		batch, held = b.pub.takeRound(batch[:0], time.Now())
		if held {
			signal(b.pub.persistWake) // the writes held go out within the linger
		}
		switch {
		case len(batch) == 0:
		case b.health.up.Load():
			// A round begun is finished even when the node is shutting
			// down: cut short, its writes would be lost from Redis, and
			// the failure would end the handover (handOver) too.
			b.send(context.WithoutCancel(ctx), batch)
			b.pub.sent()
		default: // queued while the node recovered, which failed
			b.pub.sent()
			for i, j := range batch {
				if j.kind == jobSend {
					b.sendFailed(batch, []int{i})
				}
			}
		}
		clear(batch)
	}
}

// lingerHeld waits on t until the writes of owned rooms pending are due
// (publisher.dueIn), or a publish comes (then for its own linger at most);
// a write queued meanwhile that may wait less moves the end nearer. It
// reports false when ctx ended.
func (b *Redis) lingerHeld(ctx context.Context, t *time.Timer) bool {
	for {
		t.Reset(b.pub.dueIn(time.Now()))
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-b.pub.persistWake:
			continue
		case <-b.pub.wake:
		}
		return linger(ctx, t, b.cfg.Linger, b.cfg.Linger, nil)
	}
}

// linger waits for d on t, or until wake, whichever first (then for
// publish at most: a publish's own linger); it reports false when ctx
// ended.
func linger(ctx context.Context, t *time.Timer, d, publish time.Duration, wake chan struct{}) bool {
	t.Reset(d)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-wake:
	}
	t.Reset(publish)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// send runs one round: every job of batch in one pipeline, in order per
// room. The messages of owned rooms are stored by one script call per hash
// slot and RoomConfig (round). Redis's answers are read into replies
// (replyOf), which settle turns into what the owner protocol does next.
func (b *Redis) send(ctx context.Context, batch []job) {
	var calls []call
	_, _ = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		calls = b.round(ctx, p, batch)
		return nil
	})
	replies := make([]reply, len(calls))
	for k, c := range calls {
		replies[k] = b.replyOf(ctx, c, batch[c.js[0]].kind)
	}
	b.settle(batch, calls, replies)
}

// replyOf reads Redis's answer to call c, whose jobs are of kind k: a
// script Redis forgot (restarted) is run again first.
func (b *Redis) replyOf(ctx context.Context, c call, k jobKind) reply {
	err := c.cmd.Err()
	if redis.HasErrorPrefix(err, "NOSCRIPT") { // Redis restarted and forgot the scripts
		err = b.rerun(ctx, c.cmd)
	}
	if err != nil {
		return reply{err: err}
	}
	var r reply
	switch k {
	case jobPersist:
		res, err := c.cmd.(*redis.Cmd).Int64Slice()
		if err == nil && len(res) != len(c.rooms) {
			err = fmt.Errorf("persist script answered %d values for %d rooms", len(res), len(c.rooms))
		}
		if err != nil {
			return reply{err: err}
		}
		r.held = make([]bool, len(res))
		for n, v := range res {
			r.held[n] = v == 1
		}
	case jobRelease, jobHandover:
		held, _ := c.cmd.(*redis.Cmd).Int64()
		r.ok = held != 0
	case jobSend:
		n, _ := c.cmd.(*redis.IntCmd).Result()
		r.ok = n > 0
	case jobFill:
		r.n, _ = c.cmd.(*redis.Cmd).Int64()
	}
	return r
}

// call is one command of a round and the jobs of batch it carries.
type call struct {
	js    []int    // indices in batch of the call's jobs, in order
	rooms []string // a persist call's rooms, in the order of its answers
	cmd   redis.Cmder
}

// batchKey is what the rooms of one persist call share: a script call
// reaches one hash slot and takes one history size and TTL (rooms of one
// namespace share them).
type batchKey struct {
	slot int
	rc   RoomConfig
}

// round queues the commands of batch on p, in order, and returns them.
// Persist calls take more jobs until the pipeline is sent, so their
// commands are made at the end, in their place.
func (b *Redis) round(ctx context.Context, p redis.Pipeliner, batch []job) []call {
	// Whether each persist renews its room's TTLs, and the room's
	// RoomConfig.
	renew := make([]string, len(batch))
	rcs := make([]RoomConfig, len(batch))
	calls := b.plan(batch, renew, rcs)
	mode := b.publishMode()
	sent := time.Now().UnixNano() // the T record of each node's payload (redis_transit.go)
	for k := range calls {
		c := &calls[k]
		j := batch[c.js[0]]
		switch j.kind {
		case jobPersist:
			c.cmd = b.persistCmd(ctx, p, batch, c, renew, rcs[c.js[0]])
		case jobRelease:
			ttl := ttlArg(b.roomConfigOf(j.room).TTL)
			c.cmd = releaseScript.EvalSha(ctx, p, b.publishKeys(j.room), b.id, j.e.Seq, ttl)
		case jobPresence:
			ttl := ttlArg(b.roomConfigOf(j.room).TTL)
			c.cmd = presenceScript.EvalSha(ctx, p, []string{b.presenceKey(j.room)}, b.id, j.user, j.e.Seq, ttl, b.channel(j.room), mode)
		case jobSend:
			c.cmd = b.publishToNode(ctx, p, j.node, sendPayload(batch, c.js, sent))
		case jobHandover:
			c.cmd = b.handoverCmd(ctx, p, j)
		case jobFill:
			c.cmd = b.fillCmd(ctx, p, j)
		}
	}
	return calls
}

// plan splits batch into the calls of a round, in order, and fills renew
// and rcs for its persists. A persist joins the open call of its slot and
// RoomConfig, up to its cap, which moves it ahead of the calls made since
// that one, only when no later call holds a job of its room, so that every
// room's jobs keep their order.
func (b *Redis) plan(batch []job, renew []string, rcs []RoomConfig) []call {
	now := time.Now()
	var calls []call
	persistAt := map[batchKey]int{} // index in calls of the open persist call
	lastAt := map[string]int{}      // room → index in calls of the last call with a job of it
	keyOf := map[string]batchKey{}  // room → its call key, resolved once a round
	sendAt := map[string]int{}      // node → index in calls of its open send call
	for i, j := range batch {
		if j.kind == jobSend {
			// A node's records go out together, in their order; only a
			// change of a room's owner closes the open sends, so that
			// what went before it reaches every node first.
			if k, ok := sendAt[j.node]; ok && len(calls[k].js) < maxSendBatch {
				calls[k].js = append(calls[k].js, i)
				continue
			}
			sendAt[j.node] = len(calls)
			calls = append(calls, call{js: []int{i}})
			continue
		}
		if j.kind == jobRelease || j.kind == jobHandover {
			clear(sendAt)
		}
		room := j.room
		if j.kind == jobPersist {
			// A room's RoomConfig and renewal are asked once a round (a
			// lock each): its later jobs share the one renewal.
			key, seen := keyOf[room]
			if seen {
				renew[i], rcs[i] = "0", key.rc
			} else {
				renew[i], rcs[i] = b.renewDue(room, now)
				key = batchKey{b.slotOf(room), rcs[i]}
				keyOf[room] = key
			}
			if k, ok := persistAt[key]; ok && len(calls[k].js) < maxPersistBatch && lastAt[room] <= k {
				calls[k].js = append(calls[k].js, i)
				lastAt[room] = k
				continue
			}
			persistAt[key] = len(calls)
		}
		lastAt[room] = len(calls)
		calls = append(calls, call{js: []int{i}})
	}
	return calls
}

// persistCmd queues the persist call c of batch, whose rooms share rc, and
// notes its rooms in c.rooms. Each room's messages go together, in their
// order; the room's TTLs are renewed when any of them is due.
func (b *Redis) persistCmd(ctx context.Context, p redis.Pipeliner, batch []job, c *call, renew []string, rc RoomConfig) redis.Cmder {
	var msgs [][]int
	c.rooms, msgs = byRoom(batch, c.js)
	keys := make([]string, 0, 5*len(c.rooms))
	args := make([]any, 0, 3+2*len(c.rooms)+3*len(c.js)) // at most a run a message
	// Renewed once a renewInterval, the keys live a renewInterval longer:
	// at least the TTL after the room's last message.
	args = append(args, b.id, strconv.Itoa(rc.History), ttlArg(rc.TTL+renewInterval(rc.TTL)))
	for n, r := range c.rooms {
		keys = append(keys, b.publishKeys(r)...)
		flag := "0"
		for _, i := range msgs[n] {
			if renew[i] == "1" {
				flag = "1"
			}
		}
		if rc.History == 0 {
			// No history kept: the script raises the counter alone, so
			// one run of the last seq, without the messages.
			args = append(args, flag, 1, batch[msgs[n][len(msgs[n])-1]].e.Seq, "m", "")
			continue
		}
		args = appendRuns(append(args, flag), batch, msgs[n])
	}
	return persistScript.EvalSha(ctx, p, keys, args...)
}

// appendRuns appends to args persist.lua's count of runs of the messages
// js of batch (one room's, in seq order) and, per run of consecutive
// seqs, its last seq, its entry's field and value (redis_entry.go).
func appendRuns(args []any, batch []job, js []int) []any {
	at := len(args)
	args = append(args, 0)
	runs := 0
	for start := 0; start < len(js); {
		end := start + 1
		for end < len(js) && batch[js[end]].e.Seq == batch[js[end-1]].e.Seq+1 {
			end++
		}
		last := batch[js[end-1]].e
		if end-start == 1 {
			args = append(args, last.Seq, "m", last.Payload)
		} else {
			msgs := make([][]byte, 0, end-start)
			for _, i := range js[start:end] {
				msgs = append(msgs, batch[i].e.Payload)
			}
			args = append(args, last.Seq, "ms", runValue(msgs))
		}
		runs++
		start = end
	}
	args[at] = runs
	return args
}

// slotOf is the hash slot of a room's keys in a Redis Cluster, where one
// script call reaches one slot; 0 for the one Redis.
func (b *Redis) slotOf(room string) int {
	if b.cluster == nil {
		return 0
	}
	return keySlot(b.seqKey(room))
}

// byRoom groups the persist jobs js of batch by room: the rooms in the
// order of their first job, and each room's indices in batch, in order.
func byRoom(batch []job, js []int) (rooms []string, msgs [][]int) {
	at := map[string]int{} // room → its index in rooms and msgs
	for _, i := range js {
		r := batch[i].room
		n, ok := at[r]
		if !ok {
			n = len(rooms)
			at[r] = n
			rooms = append(rooms, r)
			msgs = append(msgs, nil)
		}
		msgs[n] = append(msgs[n], i)
	}
	return rooms, msgs
}

// rerun runs a pipelined script call again on its own, loading the script.
func (b *Redis) rerun(ctx context.Context, c redis.Cmder) error {
	args := c.Args() // evalsha sha numkeys keys... args...
	nkeys, _ := args[2].(int)
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i], _ = args[3+i].(string)
	}
	rest := args[3+nkeys:]
	var s *redis.Script
	switch args[1] {
	case persistScript.Hash():
		s = persistScript
	case presenceScript.Hash():
		s = presenceScript
	case handoverScript.Hash():
		s = handoverScript
	case fillScript.Hash():
		s = fillScript
	default:
		s = releaseScript
	}
	res := s.Run(ctx, b.rdb, keys, rest...)
	if cmd, ok := c.(*redis.Cmd); ok {
		v, err := res.Result()
		cmd.SetVal(v)
		cmd.SetErr(err)
	}
	return res.Err()
}

// publishDown publishes p while Redis is down: ordered here when this node
// owns the room, else refused with ErrUnavailable. It runs under
// healthState.localMu (whileDown), so that recovery knows when the last
// publish of the outage is done.
func (b *Redis) publishDown(p Publication) (uint64, error) {
	// A room other nodes follow is shared: while Redis is away its
	// messages would reach this node's members alone (a sender alone here:
	// no one, though answered a seq), so it is refused. Nobody can start
	// following it meanwhile: that takes Redis.
	followed := len(b.own.followersOf(p.Room)) > 0
	if !followed && !b.own.isOut(p.Room) {
		if seq, ok := b.publishOwned(p); ok {
			b.count.local.Add(1)
			return seq, nil
		}
	}
	b.count.refused.Add(1)
	return 0, ErrUnavailable
}

// renewDue is persistScript's flag asking it to renew the room's TTLs: "1"
// when this node has not renewed them for renewInterval (or never: a room
// it has not subscribed renews every time), else "0"; and the room's
// RoomConfig, read under the same lock.
func (b *Redis) renewDue(room string, now time.Time) (string, RoomConfig) {
	due, rc, ok := b.sub.renewDue(room, now)
	switch {
	case !ok:
		return "1", b.roomConfig(room)
	case due:
		return "1", rc
	default:
		return "0", rc
	}
}

func (b *Redis) publishKeys(room string) []string {
	return []string{b.seqKey(room), b.historyKey(room), b.epochKey(room), b.holderKey(room), b.roomNodesKey(room)}
}

// publishMode is the scripts' argument naming how to publish: "s" on a
// shard channel (SPUBLISH), which only a Redis Cluster needs.
func (b *Redis) publishMode() string {
	if b.cluster != nil {
		return "s"
	}
	return "-"
}
