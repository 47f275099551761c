package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// shardConns is the node's subscription connections: the one Redis's, or
// one per cluster master (made when a room of its slots is first
// subscribed), and the slot map that says which master serves a room. Its
// lock serializes changes to subscriptions (apply, for subscribeLoop, and
// reshard after a failover) and guards conns, slots, closed and node; it is
// held across Redis round trips, and subscriptions.mu is taken under it
// (its methods called by shardConns' own).
type shardConns struct {
	mu     sync.Mutex
	conns  map[string]*pubsub // by master address; "" is the one Redis
	slots  slotMap            // the cluster's, as last read
	closed bool               // Run ended: no new subscription connection
	// node is the connection the node's channel is subscribed on (a Redis
	// Cluster with the owner order: the master of the channel's slot); nil:
	// none yet, or its connection broke.
	node *pubsub
	wg   sync.WaitGroup // the receive goroutine of every pubsub
	// recv is the receive goroutines' context (Run's, set before any
	// subscription): it outlives the node's other loops until its owned
	// rooms are handed over, so that what comes meanwhile is answered.
	recv context.Context
	// left is signalled when Redis confirmed the node's channel
	// unsubscribed (leaveNode, at shutdown).
	left chan struct{}

	// Set when made, then only read.
	cluster *redis.ClusterClient           // nil: one Redis, conns[""]
	channel func(room string) string       // a room's channel (Redis.channel)
	receive func(context.Context, *pubsub) // reads a new connection (Redis.receiveLoop)
	fail    func(op string, err error)     // a command failed (Redis.fail)
}

// drop forgets ps, a broken subscription connection to a cluster master:
// go-redis would subscribe its channels again in one SSUBSCRIBE, which a
// cluster refuses across slots, so its rooms are subscribed anew by
// reshard once the cluster answers. It also forgets ps as the connection
// of the rooms of subs subscribed on it.
func (s *shardConns) drop(ps *pubsub, subs *subscriptions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[ps.addr] == ps {
		delete(s.conns, ps.addr)
	}
	_ = ps.close() // broken already
	if s.node == ps {
		s.node = nil // subscribed again by the next reshard
	}
	subs.detach(ps)
}

// leaveNode unsubscribes ch, the node's channel, at shutdown, and waits
// until Redis confirmed it or ctx ends. Redis sends a subscriber every
// message published to the channel before the confirmation, so those are
// read (and answered) first; a PUBLISH after it reaches nobody, and its
// node sends the publish on to the room's holder of the moment. Closed
// before, the connection lost what Redis had sent and no one had read: the
// other nodes waited for answers that never came, and refused.
func (s *shardConns) leaveNode(ctx context.Context, ch string) error {
	s.mu.Lock()
	ps := s.node
	if s.cluster == nil {
		ps = s.conns[""]
	}
	s.mu.Unlock()
	if ps == nil {
		return nil
	}
	if err := ps.unsubscribe(ctx, []string{ch}); err != nil {
		return fmt.Errorf("unsubscribe the node's channel: %w", err)
	}
	select {
	case <-s.left:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("unsubscribe the node's channel: %w", ctx.Err())
	}
}

// closeAll closes every connection, at shutdown: none is made after it.
func (s *shardConns) closeAll() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, c := range s.conns {
		errs = append(errs, c.close())
	}
	return errs
}

// apply applies cmds, in order, to subs and to the connections: the room
// of a subscribing command gets states[i], the state made for command i,
// and is subscribed on the connection of the master serving it; a room
// unsubscribed, or subscribed again, is unsubscribed from the connection
// its old state was on.
func (s *shardConns) apply(ctx context.Context, subs *subscriptions, cmds []subCmd, states []*roomState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rooms []string
	unsubs := map[*pubsub][]string{}
	for i, c := range cmds {
		var old *pubsub
		if c.subscribe {
			old = subs.add(c.room, states[i])
			rooms = append(rooms, c.room)
		} else {
			old = subs.remove(c.room)
		}
		if old != nil {
			unsubs[old] = append(unsubs[old], s.channel(c.room))
		}
	}
	for ps, channels := range unsubs {
		if err := ps.unsubscribe(ctx, channels); err != nil && ctx.Err() == nil {
			s.fail("unsubscribe", err)
		}
	}
	if len(rooms) > 0 {
		s.subscribe(ctx, subs, rooms)
	}
}

// subscribe subscribes rooms on the connection of the master serving each,
// and records it in subs. The caller holds s.mu.
func (s *shardConns) subscribe(ctx context.Context, subs *subscriptions, rooms []string) {
	byConn := map[*pubsub][]string{}
	for _, name := range rooms {
		ch := s.channel(name)
		ps, err := s.conn(ctx, ch)
		if err != nil {
			if ctx.Err() == nil {
				s.fail("subscribe", err)
			}
			continue // left to reshard, once the cluster answers again
		}
		subs.setConn(name, ps)
		byConn[ps] = append(byConn[ps], ch)
	}
	for ps, channels := range byConn {
		if err := ps.subscribe(ctx, channels); err != nil && ctx.Err() == nil {
			s.fail("subscribe", err)
		}
	}
}

// conn returns the subscription connection for channel: the one Redis's,
// or that of the cluster master serving the channel's slot, made when
// needed. The caller holds s.mu.
func (s *shardConns) conn(ctx context.Context, channel string) (*pubsub, error) {
	if s.cluster == nil {
		return s.conns[""], nil
	}
	if s.closed {
		return nil, redis.ErrClosed
	}
	if s.slots == nil {
		m, err := clusterSlots(ctx, s.cluster)
		if err != nil {
			return nil, err
		}
		s.slots = m
	}
	addr := s.slots.master(channel)
	if addr == "" {
		return nil, fmt.Errorf("no master serves the slot of channel %q", channel)
	}
	if ps := s.conns[addr]; ps != nil {
		return ps, nil
	}
	opts := s.cluster.Options()
	c := redis.NewClient(&redis.Options{
		Addr: addr, Username: opts.Username, Password: opts.Password, TLSConfig: opts.TLSConfig,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 1, DialerRetries: 1,
		Dialer: rawDialer(time.Second, opts.TLSConfig != nil), Protocol: respVersion,
	})
	ps := &pubsub{addr: addr, client: c, ps: c.SSubscribe(ctx)}
	s.conns[addr] = ps
	s.wg.Go(func() { s.receive(s.recv, ps) })
	return ps, nil
}

// subscribeNode subscribes ch, the node's channel, with SSUBSCRIBE on the
// master that serves its slot, unless it is subscribed there already: on
// a Redis Cluster the owner order's records reach a node on its shard
// channel.
func (s *shardConns) subscribeNode(ctx context.Context, ch string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subscribeNodeLocked(ctx, ch)
}

// subscribeNodeLocked is subscribeNode for a caller that holds s.mu.
func (s *shardConns) subscribeNodeLocked(ctx context.Context, ch string) error {
	ps, err := s.conn(ctx, ch)
	if err != nil {
		return err
	}
	if s.node == ps {
		return nil
	}
	if old := s.node; old != nil && s.conns[old.addr] == old {
		_ = old.unsubscribe(ctx, []string{ch}) // the slot left that master
	}
	if err := ps.subscribe(ctx, []string{ch}); err != nil {
		return err
	}
	s.node = ps
	return nil
}

// reshard takes m as the cluster's slots: connections to nodes that no
// longer serve a slot are closed, and every room of subs not subscribed,
// and confirmed, where it lives now is subscribed there, then the node's
// channel nodeCh. It returns the rooms moved and, for each, a
// channel closed when its new subscription is confirmed.
func (s *shardConns) reshard(ctx context.Context, m slotMap, subs *subscriptions, nodeCh string) (moved []string, waits []chan struct{}, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots = m
	masters := map[string]bool{}
	for _, r := range m {
		masters[r.addr] = true
	}
	for addr, ps := range s.conns {
		if !masters[addr] {
			_ = ps.close() // a failed master: its connection is broken anyway
			delete(s.conns, addr)
		}
	}
	moved, waits, left := subs.unplace(
		func(ps *pubsub) bool { return s.conns[ps.addr] == ps },
		func(room string) string { return m.master(s.channel(room)) })
	for ps, rooms := range left {
		channels := make([]string, len(rooms))
		for i, room := range rooms {
			channels[i] = s.channel(room)
		}
		_ = ps.unsubscribe(ctx, channels) // the slot left that master: nothing more comes from it
	}
	s.subscribe(ctx, subs, moved)
	if err := s.subscribeNodeLocked(ctx, nodeCh); err != nil {
		return nil, nil, fmt.Errorf("subscribe the node's channel: %w", err)
	}
	return moved, waits, nil
}
