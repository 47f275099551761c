package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsPresence is who is in the rooms across the nodes of a NATS cluster:
// a key a room, node and user in a bucket (<room>.<node>.<user>, the count),
// each change also told on the room's subject to the nodes that have the
// room. A node loading a room reads the room's keys.
type natsPresence struct {
	kv    jetstream.KeyValue
	mu    sync.Mutex
	queue []natsPresenceChange // in the order the rooms made them
	wake  chan struct{}
	self  [2]string // the name and URL this node announced
	known map[string]bool
}

type natsPresenceChange struct {
	room, user string
	count      int
}

func (p *natsPresence) init() {
	p.wake = make(chan struct{}, 1)
	p.known = make(map[string]bool)
}

func (p *natsPresence) open(ctx context.Context, js jetstream.JetStream, name string, replicas int) error {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: name, History: 1, Replicas: replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("open the presence bucket %s: %w", name, err)
	}
	p.kv = kv
	return nil
}

// userToken is a user's key token: base64url, after a letter so that the
// anonymous user ("") has one too.
func userToken(user string) string { return "u" + base64.RawURLEncoding.EncodeToString([]byte(user)) }

func userOfToken(tok string) (string, error) {
	u, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "u"))
	return string(u), err
}

// Presence implements Cluster: it queues the change, in order.
func (b *NATS) Presence(room, user string, count int) {
	b.pres.push(natsPresenceChange{room, user, count})
}

// presenceLoop stores and tells the queued presence changes.
func (b *NATS) presenceLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.pres.wake:
		}
		for _, c := range b.pres.take() {
			if err := b.storePresence(ctx, c); err != nil && ctx.Err() == nil {
				b.failed("store presence", err)
			}
		}
	}
}

func (b *NATS) storePresence(ctx context.Context, c natsPresenceChange) error {
	key := roomKey(c.room) + "." + b.id + "." + userToken(c.user)
	var err error
	if c.count <= 0 {
		err = b.pres.kv.Delete(ctx, key)
	} else {
		_, err = b.pres.kv.Put(ctx, key, []byte(strconv.Itoa(c.count)))
	}
	if err != nil {
		return err
	}
	m := nats.NewMsg(b.roomSubject(c.room))
	m.Header.Set(natsKindHeader, natsKindPresence)
	m.Data = []byte(b.id + "\x1f" + c.user + "\x1f" + strconv.Itoa(c.count))
	return b.nc.PublishMsg(m)
}

// onMsg tells the rooms another node's presence change.
func (p *natsPresence) onMsg(b *NATS, room string, data []byte) {
	parts := strings.SplitN(string(data), "\x1f", 3)
	if len(parts) != 3 || parts[0] == b.id {
		return
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		return
	}
	b.h.RemotePresence(room, parts[0], parts[1], n)
}

// subscribed reads who is in room on the other nodes (a room loading here).
func (p *natsPresence) subscribed(b *NATS, room string) {
	ctx, cancel := context.WithTimeout(b.runCtx(), natsHistoryWait)
	defer cancel()
	err := p.each(ctx, roomKey(room)+".*.*", func(_, node, user string, n int) {
		if node != b.id {
			b.h.RemotePresence(room, node, user, n)
		}
	})
	if err != nil {
		b.failed("read a room's presence", err)
	}
}

// unsubscribed: nothing to do; the room's presence here was set to 0 by
// its members leaving.
func (p *natsPresence) unsubscribed(string) {}

// each calls fn with every presence key matching filter and its count.
func (p *natsPresence) each(ctx context.Context, filter string, fn func(room, node, user string, n int)) error {
	w, err := p.kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-w.Updates():
			if e == nil {
				return nil // the values there were; what follows is new
			}
			parts := strings.Split(e.Key(), ".")
			n, err := strconv.Atoi(string(e.Value()))
			if len(parts) != 3 || err != nil {
				continue
			}
			room, rerr := roomOfKey(parts[0])
			user, uerr := userOfToken(parts[2])
			if rerr == nil && uerr == nil {
				fn(room, parts[1], user, n)
			}
		}
	}
}

// Occupancy implements Cluster: the presence keys of live nodes.
func (b *NATS) Occupancy(ctx context.Context, room string) (map[string]map[string]int, error) {
	nodes, err := b.liveNodes(ctx)
	if err != nil {
		return nil, err
	}
	filter := "*.*.*"
	if room != "" {
		filter = roomKey(room) + ".*.*"
	}
	out := map[string]map[string]int{}
	err = b.pres.each(ctx, filter, func(r, node, user string, n int) {
		if _, ok := nodes[node]; !ok {
			return
		}
		if out[r] == nil {
			out[r] = map[string]int{}
		}
		out[r][user] += n
	})
	if err != nil {
		return nil, fmt.Errorf("read presence from NATS: %w", err)
	}
	return out, nil
}

// Announce implements Cluster: the node's name and URL ride on its lease.
func (b *NATS) Announce(name, url string) {
	b.pres.announce(name, url)
}

func (b *NATS) leaseValue() []byte { return b.pres.announced() }

func (p *natsPresence) push(c natsPresenceChange) {
	p.mu.Lock()
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	signal(p.wake)
}

func (p *natsPresence) take() []natsPresenceChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue = nil
	return q
}

func (p *natsPresence) announce(name, url string) {
	p.mu.Lock()
	p.self = [2]string{name, url}
	p.mu.Unlock()
}

// announced is the node's name and URL as its lease carries them.
func (p *natsPresence) announced() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return []byte(p.self[0] + " " + p.self[1])
}

// liveNodes returns the nodes whose leases live: id to "name url".
func (b *NATS) liveNodes(ctx context.Context) (map[string]string, error) {
	w, err := b.lease.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read the nodes from NATS: %w", err)
	}
	defer func() { _ = w.Stop() }()
	nodes := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e := <-w.Updates():
			if e == nil {
				return nodes, nil
			}
			nodes[e.Key()] = string(e.Value())
		}
	}
}

// Nodes implements Cluster.
func (b *NATS) Nodes(ctx context.Context) (map[string]string, error) {
	ctx, cancel := withDeadline(ctx, natsHistoryWait)
	defer cancel()
	live, err := b.liveNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(live))
	for id, v := range live {
		name, url, _ := strings.Cut(v, " ")
		if name == "" {
			name = id
		}
		out[name] = url
	}
	return out, nil
}

// announceLoop watches the nodes: one whose lease ended is gone, and the
// rooms forget its presence (NodeGone); the rooms this node follows from
// it are taken over (or load again), whether or not a member sends: an
// idle member of such a room must still be told that its stream ended.
func (b *NATS) announceLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.Lease / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c, cancel := context.WithTimeout(ctx, natsHistoryWait)
		live, err := b.liveNodes(c)
		cancel()
		if err != nil {
			continue
		}
		for node := range b.pres.known {
			if _, ok := live[node]; !ok {
				b.h.NodeGone(node)
				b.forgetPresence(ctx, node)
			}
		}
		b.pres.known = map[string]bool{}
		for node := range live {
			b.pres.known[node] = true
		}
		for _, f := range b.st.followedFrom() {
			if _, ok := live[f.owner]; !ok {
				b.wg.Go(func() { b.ownerDied(ctx, f) })
			}
		}
	}
}

// ownerDied takes over a room whose owner's lease ended (checked again:
// the nodes were read a moment ago), or loads a loading one again.
func (b *NATS) ownerDied(ctx context.Context, f natsFollowed) {
	if f.loading {
		b.load(f.room, f.gen)
		return
	}
	if alive, err := b.lease.alive(ctx, f.owner); err != nil || alive {
		return
	}
	if err := b.takeOver(ctx, f.room, f.owner); err != nil && ctx.Err() == nil {
		b.failed("take a room over", err)
	}
}

// forgetPresence deletes a gone node's presence keys (any node may).
func (b *NATS) forgetPresence(ctx context.Context, node string) {
	c, cancel := context.WithTimeout(ctx, natsHistoryWait)
	defer cancel()
	var keys []string
	_ = b.pres.each(c, "*."+node+".*", func(room, _, user string, _ int) {
		keys = append(keys, roomKey(room)+"."+node+"."+userToken(user))
	})
	for _, k := range keys {
		_ = b.pres.kv.Delete(c, k) // best effort: readers skip dead nodes anyway
	}
}

func (b *NATS) controlSubject() string { return b.cfg.Prefix + ".control" }

// Disconnect implements Cluster: every node, this one included, gets it
// on the control subject.
func (b *NATS) Disconnect(ctx context.Context, d Disconnect) error {
	msg, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := b.nc.Publish(b.controlSubject(), msg); err != nil {
		return fmt.Errorf("ask the nodes to disconnect: %w", err)
	}
	ctx, cancel := withDeadline(ctx, natsFlushWait)
	defer cancel()
	return b.nc.FlushWithContext(ctx)
}

// subscribeControl has this node carry out what was asked of every node.
func (b *NATS) subscribeControl() error {
	_, err := b.nc.Subscribe(b.controlSubject(), func(m *nats.Msg) {
		var d Disconnect
		if err := json.Unmarshal(m.Data, &d); err != nil {
			b.count.errors.Add(1)
			return
		}
		b.h.Disconnect(d)
	})
	if err != nil {
		return fmt.Errorf("subscribe to the control subject: %w", err)
	}
	return nil
}
