package broker

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Presence across nodes. Each node writes, per room, how many connections
// of each user it has into the room's presence hash (field "node␟user") and
// announces the change on the room's channel ("P node␟count␟user"); a node
// that loads the room reads the hash, then follows the announcements. The
// fields of a node whose lease ended (it died) are forgotten by every other
// node within a second or two of it, and removed from the hash.

// presenceState is what this node knows of presence across nodes, apart
// from the rooms (which hold the counts): what it reported of its own
// connections, to write again after an outage, and the peers whose reports
// it follows, to forget when their lease ends. It has no lock of its own:
// it is subscriptions' (subscriptions.pres), whose methods below call its
// own with that lock held, one step each: none calls out.
type presenceState struct {
	reported map[string]map[string]int // room → user → connections here, as told to the others
	peers    map[string]bool           // nodes whose presence this node follows
}

// report records that this node has count connections of user in room.
func (s *presenceState) report(room, user string, count int) {
	users := s.reported[room]
	switch {
	case count > 0 && users == nil:
		s.reported[room] = map[string]int{user: count}
	case count > 0:
		users[user] = count
	case users != nil:
		delete(users, user)
		if len(users) == 0 {
			delete(s.reported, room)
		}
	}
}

// jobs returns a presence job for everything this node reported.
func (s *presenceState) jobs() []job {
	var jobs []job
	for room, users := range s.reported {
		for u, n := range users {
			jobs = append(jobs, job{kind: jobPresence, room: room, user: u, e: Entry{Seq: uint64(n)}})
		}
	}
	return jobs
}

// follow records that node reported presence here.
func (s *presenceState) follow(node string) { s.peers[node] = true }

// following returns the nodes whose presence this node follows.
func (s *presenceState) following() []string {
	peers := make([]string, 0, len(s.peers))
	for p := range s.peers {
		peers = append(peers, p)
	}
	return peers
}

// forget stops following node: it is gone.
func (s *presenceState) forget(node string) { delete(s.peers, node) }

func newPresenceState() presenceState {
	return presenceState{reported: make(map[string]map[string]int), peers: make(map[string]bool)}
}

// reportPresence records that this node has count connections of user in
// room.
func (s *subscriptions) reportPresence(room, user string, count int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pres.report(room, user, count)
}

// presenceJobs returns a presence job for everything this node reported.
func (s *subscriptions) presenceJobs() []job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pres.jobs()
}

// followPresence records that node reported presence here.
func (s *subscriptions) followPresence(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pres.follow(node)
}

// presencePeers returns the nodes whose presence this node follows.
func (s *subscriptions) presencePeers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pres.following()
}

// forgetPeer stops following node's presence: it is gone.
func (s *subscriptions) forgetPeer(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pres.forget(node)
}

func (b *Redis) presenceKey(room string) string { return b.cfg.Prefix + ":{" + room + "}:presence" }

// Presence implements Cluster.
func (b *Redis) Presence(room, user string, count int) {
	b.sub.reportPresence(room, user, count)
	if b.health.up.Load() {
		b.pub.queue(job{kind: jobPresence, room: room, user: user, e: Entry{Seq: uint64(count)}})
	}
}

// republishPresence writes again, after an outage, what this node reported:
// the changes made meanwhile never reached Redis.
func (b *Redis) republishPresence() {
	b.pub.queue(b.sub.presenceJobs()...)
}

// onPresence handles a "P node␟count␟user" announcement.
func (b *Redis) onPresence(room, payload string) {
	node, rest, ok1 := strings.Cut(payload[1:], "\x1f")
	count, user, ok2 := strings.Cut(rest, "\x1f")
	n, err := strconv.Atoi(count)
	if !ok1 || !ok2 || err != nil {
		b.count.errs.Add(1)
		return
	}
	b.remotePresence(room, node, user, n)
}

func (b *Redis) remotePresence(room, node, user string, n int) {
	if node == b.id {
		return
	}
	b.sub.followPresence(node)
	b.h.RemotePresence(room, node, user, n)
}

// loadPresence hands the room the presence the hash holds.
func (b *Redis) loadPresence(room string, fields map[string]string) {
	for f, v := range fields {
		node, user, ok := strings.Cut(f, "\x1f")
		n, err := strconv.Atoi(v)
		if ok && err == nil {
			b.remotePresence(room, node, user, n)
		}
	}
}

// checkPeers forgets the presence of the nodes whose lease ended.
func (b *Redis) checkPeers(ctx context.Context) {
	peers := b.sub.presencePeers()
	if len(peers) == 0 {
		return
	}
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cmds, err := b.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for _, peer := range peers {
			p.Exists(c, b.leaseKey(peer))
		}
		return nil
	})
	if err != nil {
		return // checked again at the next renewal
	}
	for i, peer := range peers {
		if cmds[i].(*redis.IntCmd).Val() != 0 {
			continue
		}
		b.sub.forgetPeer(peer)
		b.ownerGone(peer, "its owner's lease ended")
		gone := b.h.NodeGone(peer)
		b.log.Info("a node's lease ended: its members left the rooms", "node", peer, "rooms", len(gone))
		loaded := b.sub.synced()
		_, _ = b.rdb.Pipelined(c, func(p redis.Pipeliner) error { // best effort: any node may clean up
			for room, users := range gone {
				fields := make([]string, len(users))
				for j, u := range users {
					fields[j] = peer + "\x1f" + u
				}
				p.HDel(c, b.presenceKey(room), fields...)
				p.SRem(c, b.roomNodesKey(room), peer)
			}
			// Out of the sets of this node's rooms too, present or not.
			// Should it only have been stopped, it rejoins them when it
			// runs again.
			for _, room := range loaded {
				if _, ok := gone[room]; !ok {
					p.SRem(c, b.roomNodesKey(room), peer)
				}
			}
			return nil
		})
	}
}
