package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

type subCmd struct {
	room      string
	subscribe bool
}

// roomState is what the broker knows of a room this node subscribed to.
type roomState struct {
	confirmed chan struct{} // closed when Redis confirmed the subscription
	unsynced  bool          // loaded while Redis was down: its local seqs are not Redis's
	ps        *pubsub       // the connection subscribed to the room; nil: none yet
	leaving   bool          // Unsubscribe was called
	renewed   time.Time     // when this node's last publish renewed the room's TTLs in Redis
	rc        RoomConfig    // the room's history size and TTL, resolved when subscribed
}

// subscriptions is the rooms this node subscribed to, the (un)subscriptions
// queued for subscribeLoop, the rooms whose keys this node keeps alive and
// the presence it reported and follows.
// rooms is written by the subscription goroutine alone and read by others
// under mu; a roomState's fields, and kept, are read and written under mu.
// mu is taken under shardConns.mu and fillMu, and nothing is taken under it:
// the wakes sent under it never block.
type subscriptions struct {
	mu    sync.Mutex
	cmds  []subCmd
	wake  chan struct{} // cmds were queued
	rooms map[string]*roomState
	n     atomic.Int64  // len(rooms), for Stats without the lock
	kept  keptRooms     // the rooms loaded from Redis, whose keys this node keeps alive (redis_keepalive.go)
	pres  presenceState // what this node reported, whom it follows (redis_presence.go)
}

func newSubscriptions() subscriptions {
	return subscriptions{wake: make(chan struct{}, 1), rooms: make(map[string]*roomState), kept: newKeptRooms(), pres: newPresenceState()}
}

// queue queues c for subscribeLoop and wakes it.
func (s *subscriptions) queue(c subCmd) {
	s.mu.Lock()
	s.cmds = append(s.cmds, c)
	s.mu.Unlock()
	signal(s.wake)
}

// takeCmds returns the queued commands, in order, and forgets them.
func (s *subscriptions) takeCmds() []subCmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmds := s.cmds
	s.cmds = nil
	return cmds
}

// names returns the rooms subscribed here.
func (s *subscriptions) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.rooms))
	for name := range s.rooms {
		names = append(names, name)
	}
	return names
}

// Subscribe implements Broker.
func (b *Redis) Subscribe(room string) { b.sub.queue(subCmd{room: room, subscribe: true}) }

// Unsubscribe implements Broker.
func (b *Redis) Unsubscribe(room string) {
	b.sub.leave(room)               // a holding on its way is given back (owns)
	b.unfollow(room)                // when followed: the owner sends it no more
	b.release(room, 0)              // when held: handed to a follower, or released after the writes queued before
	b.sub.queue(subCmd{room: room}) // and out of the room's set of nodes (subscribeLoop)
}

// receiveLoop reads the channels of one subscription connection: the
// node's channel, which carries the owner protocol's records (messages of
// followed rooms, in order, any gap filled from the room's history
// stream), and the rooms' channels, which carry their control messages.
func (b *Redis) receiveLoop(ctx context.Context, s *pubsub) {
	reconnected := false
	backoff := newBackoff()
	for ctx.Err() == nil {
		msg, err := s.ps.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			b.fail("receive", err)
			if s.client != nil {
				b.shards.drop(s, &b.sub)
				return
			}
			reconnected = true
			backoff.sleep(ctx)
			continue
		}
		backoff.reset()
		switch m := msg.(type) {
		case *redis.Message:
			if m.Channel == b.nodeChannel() {
				b.onNodeChannel(ctx, m.Payload)
				continue
			}
			b.onControl(ctx, b.roomOf(m.Channel), m.Payload)
		case *redis.Subscription:
			if m.Channel == b.nodeChannel() {
				if m.Kind == "unsubscribe" || m.Kind == "sunsubscribe" {
					signal(b.shards.left) // leaveNode, at shutdown
				}
				continue
			}
			b.onSubscription(ctx, s, m, reconnected)
		}
	}
}

// onSubscription handles Redis's answer to a (un)subscription on s.
func (b *Redis) onSubscription(ctx context.Context, s *pubsub, m *redis.Subscription, reconnected bool) {
	name := b.roomOf(m.Channel)
	c := b.sub.confirm(name, s, m.Kind == "subscribe" || m.Kind == "ssubscribe")
	if !c.known {
		return
	}
	switch m.Kind {
	case "subscribe", "ssubscribe":
		if c.confirmed && reconnected { // resubscribed after a broken connection
			b.catchUp(ctx, name)
		}
	case "sunsubscribe":
		// Not ours when the room is still subscribed here and confirmed:
		// the master gave the room's slot away (a failover, a resharding).
		// Until the room is subscribed where it lives now, serve locally.
		if c.confirmed && c.ours {
			b.fail("receive", fmt.Errorf("room %q moved off master %s", name, s.addr))
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// onNodeChannel handles a payload of the node's channel: the owner
// protocol's records (redis_followwire.go). Anything else is counted as an
// error and dropped: a bug, or something else published on the channel.
func (b *Redis) onNodeChannel(ctx context.Context, payload string) {
	rest, ok := strings.CutPrefix(payload, string(followMark))
	if !ok {
		b.count.errs.Add(1)
		b.log.Warn("a payload on the node's channel that is no owner-protocol record was dropped", "bytes", len(payload))
		return
	}
	b.onFollow(ctx, rest)
}

// fill delivers the messages after seq from through to, from the room's
// history stream, and reports whether it found them all. When some are no
// longer there the room's members cannot have them: the room is dropped
// (lostStream), and they resume and are told with a history_gap. The caller
// holds fillMu.
func (b *Redis) fill(ctx context.Context, name string, from, to uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// An entry holds the messages up to its id's seq (redis_entry.go): the
	// first to-from entries from from+1 on reach to.
	entries, err := b.rdb.XRangeN(ctx, b.historyKey(name), strconv.FormatUint(from+1, 10)+"-0", "+", int64(to-from)).Result()
	if err != nil {
		b.fail("fetch history", err)
	}
	next := from + 1
	var run []Delivered
	for _, e := range streamEntries(entries) {
		if e.Seq < next {
			continue
		}
		if e.Seq > next || e.Seq > to {
			// Past to (an entry's run goes on beyond it): done. Or a
			// hole: the stream no longer holds next (it fell out of the
			// history), and delivering past it would skip it in silence.
			break
		}
		b.count.gaps.Add(1)
		run = append(run, Delivered{Room: name, Seq: e.Seq, Payload: e.Payload})
		next = e.Seq + 1
	}
	if len(run) > 0 {
		b.h.DeliverMany(run)
	}
	if _, cur, loaded := b.h.Position(name); loaded && cur < to {
		b.count.lost.Add(to - cur)
		b.lostStream(name, "messages missing from the room's stream in Redis")
		return false
	}
	return true
}

// lostStream drops a room whose stream on this node is no longer the
// room's: its members are closed with 1012 (Hub.Drop), resume with their
// seq and epoch, and get history_gap (with reset for a new epoch) and what
// the stream holds, instead of missing messages in silence.
func (b *Redis) lostStream(room, why string) {
	b.own.giveUp(room)
	b.tellDropped(room)
	if b.h.Drop(room, nil) {
		b.count.diverged.Add(1)
		b.log.Warn("room's stream diverged from Redis's: its members resume and are told what they missed", "room", room, "why", why)
	}
}

// holderOf reads the node that holds room ("" for none).
func (b *Redis) holderOf(ctx context.Context, room string) (string, error) {
	holder, err := b.rdb.Get(ctx, b.holderKey(room)).Result()
	if errorsIsNil(err) {
		return "", nil
	}
	return holder, err
}

// catchUp brings a room up to Redis after a broken subscription.
func (b *Redis) catchUp(ctx context.Context, name string) {
	b.fillMu.Lock()
	defer b.fillMu.Unlock()
	epoch, cur, loaded := b.h.Position(name)
	if !loaded {
		return
	}
	if b.sub.unsynced(name) {
		// Loaded while Redis was down: its members joined a stream of this
		// node alone, which never had the room's history nor the messages
		// of the nodes that own it meanwhile. They resume into Redis's.
		b.lostStream(name, "loaded while Redis was unreachable")
		return
	}
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	// Into the room's set of nodes first (Redis may have lost it, or a peer
	// taken this node out when its lease lapsed): from then on the room's
	// messages come to this node's channel, and the counter read next
	// covers every one before.
	err := b.rdb.SAdd(c, b.roomNodesKey(name), b.id).Err()
	if err == nil {
		err = b.rdb.Expire(c, b.roomNodesKey(name), b.setTTL(name)).Err()
	}
	var holder string
	if err == nil {
		holder, err = b.holderOf(c, name)
	}
	// A held room's seqs come from its owner alone, and Redis's counter
	// lags the owner's history, written behind: only the epoch tells
	// whether Redis kept the stream (a counter compared with this node's
	// seq would start every room anew after a failover). The owner raises
	// the counter when it frees the room.
	check := cur
	if holder != "" {
		check = 0
	}
	var res []int64
	if err == nil {
		res, err = streamScript.Run(c, b.rdb, []string{b.seqKey(name), b.epochKey(name)}, check, int(b.roomConfigOf(name).TTL/time.Second), epoch, NewEpoch()).Int64Slice()
	}
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("stream check answered %v", res)
	}
	cancel()
	if err != nil {
		b.fail("catch up", err)
		return
	}
	switch seq := uint64(res[0]); {
	case res[1] == 1:
		b.lostStream(name, "Redis no longer holds the room's stream as this node's members saw it")
	case seq > cur:
		b.fill(ctx, name, cur, seq)
	}
}

// subscribeLoop subscribes and unsubscribes rooms in batches, and loads
// each newly subscribed room's seq and history tail.
func (b *Redis) subscribeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.sub.wake:
		}
		cmds := b.sub.takeCmds()
		states := make([]*roomState, len(cmds)) // per subscribing command, the room's new state
		newRooms := map[string]*roomState{}
		last := map[string]bool{} // room → whether its last command subscribes
		for i, c := range cmds {
			last[c.room] = c.subscribe
			if c.subscribe {
				states[i] = &roomState{confirmed: make(chan struct{}), rc: b.roomConfig(c.room)}
				newRooms[c.room] = states[i]
			} else {
				delete(newRooms, c.room)
			}
		}
		b.shards.apply(ctx, &b.sub, cmds, states)
		b.leave(ctx, last)
		if len(newRooms) > 0 {
			b.load(ctx, newRooms)
		}
	}
}

// reshard reads the cluster's slots again and subscribes every room on the
// master that serves it now; connections to nodes that no longer serve a
// slot are closed. It waits (a bounded time) for the moved rooms'
// subscriptions, so that catching up after it misses nothing.
func (b *Redis) reshard(ctx context.Context) error {
	if b.cluster == nil {
		return nil
	}
	m, err := clusterSlots(ctx, b.cluster)
	if err != nil {
		return err
	}
	moved, waits, err := b.shards.reshard(ctx, m, &b.sub, b.nodeChannel())
	if err != nil {
		return err
	}
	timeout := time.After(2 * time.Second)
	for _, w := range waits {
		select {
		case <-w:
		case <-timeout:
			return errors.New("resubscribing moved rooms: no confirmation")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(moved) > 0 {
		b.log.Info("rooms resubscribed where the cluster serves them now", "rooms", len(moved))
	}
	return nil
}

// leave takes this node out of the set of nodes of each room whose last
// command unsubscribes it, so that Redis sends it their messages no more.
// It runs on the subscription goroutine, in the commands' order: a room
// freed and loaded again is back in its set by the load, never taken out
// after it.
func (b *Redis) leave(ctx context.Context, last map[string]bool) {
	var rooms []string
	for room, sub := range last {
		if !sub {
			rooms = append(rooms, room)
		}
	}
	if len(rooms) == 0 || !b.health.up.Load() {
		return // while Redis is down, the node stays in the sets: messages of rooms it freed reach it and are dropped
	}
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cmds, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for _, room := range rooms {
			p.SRem(c, b.roomNodesKey(room), b.id)
		}
		return nil
	})
	if err := pipelineErr(cmds, err); err != nil && ctx.Err() == nil {
		b.fail("leave rooms", err)
	}
}
