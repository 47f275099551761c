package room

import (
	"slices"
	"strings"

	"github.com/scalechat/scalechat/internal/protocol"
)

// presence is who is in a room, across the cluster: connections per user
// on this node, and on every other node as their brokers report them. ""
// stands for connections that gave no user.
type presence struct {
	local map[string]int
	nodes map[string]map[string]int // node → user → connections
}

// totalLocked returns user's connections in the room on every node.
func (r *Room) totalLocked(user string) int {
	n := r.pres.local[user]
	for _, users := range r.pres.nodes {
		n += users[user]
	}
	return n
}

// AddUser counts a connection of user (the token's subject, the name the
// client gave, or "") that joined the room here, tells the other nodes
// through the broker, and tells the members who asked when it is the user's
// first connection to the room.
// A room whose namespace has presence off (Options.NoPresence) counts
// nobody.
func (r *Room) AddUser(user string) { r.addUser(user, 1) }

// RemoveUser is AddUser's opposite, for a connection that left.
func (r *Room) RemoveUser(user string) { r.addUser(user, -1) }

func (r *Room) addUser(user string, delta int) {
	if r.opts.NoPresence {
		return
	}
	r.mu.Lock()
	if r.pres.local == nil {
		r.pres.local = make(map[string]int)
	}
	before := r.totalLocked(user)
	n := r.pres.local[user] + delta
	if n <= 0 {
		n = 0
		delete(r.pres.local, user)
	} else {
		r.pres.local[user] = n
	}
	r.presenceChangedLocked(user, before)
	if !r.closed { // a dropped room told its users gone as it was dropped
		r.tellPresenceLocked(user, n)
	}
	r.mu.Unlock()
}

// tellPresenceLocked tells the cluster and the webhooks that this node has
// n connections of user in the room. Told under the room's lock, in the
// order the counts were made: two connections of a user leaving at once
// on two loops counted 1, then 0, and told after the unlock could tell 0,
// then 1, and the cluster and the webhooks kept a user gone for present.
// Both only record and queue (locksordering.txt).
func (r *Room) tellPresenceLocked(user string, n int) {
	if r.hub.cluster != nil {
		r.hub.cluster.Presence(r.name, user, n)
	}
	if r.hub.tracker != nil {
		r.hub.tracker.Presence(r.name, user, n)
	}
}

// forgetLocalLocked tells the cluster and the webhooks, as the room is
// dropped with members (Hub.Drop), that none of its users' connections are
// here any more: they are being closed (1012), and those that come back
// count in the room made anew. Told later, at each connection's leave, a
// user's last leave of this room could come after a rejoin into the new
// one (another of its connections, on another loop, quicker) and undo it.
func (r *Room) forgetLocalLocked() {
	for user := range r.pres.local {
		r.tellPresenceLocked(user, 0)
	}
	clear(r.pres.local)
}

// presenceChangedLocked tells the members that asked for presence events
// when user came (its first connection) or went (its last).
func (r *Room) presenceChangedLocked(user string, before int) {
	after := r.totalLocked(user)
	if user == "" || r.opts.NoJoinLeave || (before == 0) == (after == 0) {
		return
	}
	frame := protocol.AppendPresenceEvent(nil, r.name, user, after > 0)
	for i, n := range r.local {
		if n > 0 {
			r.hub.queues[i].push(Delivery{Room: r, Presence: frame}, true)
		}
	}
}

// Presence returns who is in the room across the cluster: its connections,
// the users (sorted) with their connections, and the connections without a
// user.
func (r *Room) Presence() (members int, users []protocol.UserCount, anonymous int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := make(map[string]int, len(r.pres.local))
	for u, n := range r.pres.local {
		all[u] += n
	}
	for _, us := range r.pres.nodes {
		for u, n := range us {
			all[u] += n
		}
	}
	for u, n := range all {
		members += n
		if u == "" {
			anonymous = n
			continue
		}
		users = append(users, protocol.UserCount{User: u, Connections: n})
	}
	slices.SortFunc(users, func(a, b protocol.UserCount) int { return strings.Compare(a.User, b.User) })
	return members, users, anonymous
}

// RemotePresence records that node has count connections of user in the
// room (0: none), as its broker reported it.
func (h *Hub) RemotePresence(name, node, user string, count int) {
	r := h.lookup([]byte(name))
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	before := r.totalLocked(user)
	users := r.pres.nodes[node]
	switch {
	case count > 0 && users == nil:
		if r.pres.nodes == nil {
			r.pres.nodes = make(map[string]map[string]int)
		}
		users = map[string]int{user: count}
		r.pres.nodes[node] = users
	case count > 0:
		users[user] = count
	case users != nil:
		delete(users, user)
		if len(users) == 0 {
			delete(r.pres.nodes, node)
		}
	}
	r.presenceChangedLocked(user, before)
}

// NodeGone forgets what node reported in every room (it died: its lease
// ended) and returns, per room, the users it had there.
func (h *Hub) NodeGone(node string) map[string][]string {
	gone := map[string][]string{}
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		rooms := make([]*Room, 0, len(s.rooms))
		for _, r := range s.rooms {
			rooms = append(rooms, r)
		}
		s.mu.Unlock()
		for _, r := range rooms {
			r.mu.Lock()
			users := r.pres.nodes[node]
			delete(r.pres.nodes, node)
			for u, n := range users {
				gone[r.name] = append(gone[r.name], u)
				if r.totalLocked(u) == 0 {
					r.presenceChangedLocked(u, n)
				}
			}
			r.mu.Unlock()
		}
	}
	return gone
}
