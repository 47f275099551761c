package webhook

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// The cluster's webhook state on NATS, as the dispatcher keeps it
// (nats.go says where each piece lives): the changes the nodes append to
// the stream, and natsTally, which applies them in the stream's order and
// decides the events. Applying is a function of the tally and the change
// alone: a new dispatcher that loads the tally as of a position and
// replays the stream from there decides the same events, with the same
// IDs.

// The ops of a change.
const (
	natsOpApply = "apply" // a node's changes since its last message
	natsOpSync  = "sync"  // a part of a node's whole state (Begin: the first, End: the last)
	natsOpGone  = "gone"  // a dead node's counts leave (appended by the dispatcher)
	natsOpLeave = "leave" // a node stopping: its counts leave
	natsOpEpoch = "epoch" // a new epoch starts here (appended by the dispatcher)
)

// natsChange is one message of the changes stream: one node's changes, in
// the order it made them.
type natsChange struct {
	Op   string `json:"op"`
	Node string `json:"node,omitempty"`
	// Inc is the node's incarnation: its lease's value when it sent the
	// change. A node whose lease ended comes back as a new incarnation
	// with a sync; the presence of an incarnation that is no longer the
	// node's is ignored (its messages are not).
	Inc   string `json:"inc,omitempty"`
	Epoch string `json:"epoch,omitempty"` // an epoch change's epoch
	Begin bool   `json:"begin,omitempty"`
	End   bool   `json:"end,omitempty"`
	// Dropped counts the changes the node gave up since it last told
	// (the stream full, or its own queue): a Dropped event goes first.
	Dropped uint64     `json:"dropped,omitempty"`
	Items   []natsItem `json:"items,omitempty"`
}

// natsItem is a presence change (the node's absolute count of User's
// connections in Room) or, with Msg, a message published as Seq.
type natsItem struct {
	Room  string          `json:"r"`
	User  string          `json:"u,omitempty"`
	Count int             `json:"c,omitempty"`
	Seq   uint64          `json:"s,omitempty"`
	Msg   json.RawMessage `json:"m,omitempty"`
}

// size is what an item holds, roughly, queued or in a message.
func (it *natsItem) size() int64 {
	return int64(len(it.Room)+len(it.User)+len(it.Msg)) + 48
}

// natsKey is one node's count of one user in one room.
type natsKey struct{ room, node, user string }

// natsSlot is a value of the tally: a count's connections and the sync
// generation that set it, or a node's incarnation and current sync
// generation (the stream seq of its last sync's first part). The zero
// slot is none.
type natsSlot struct {
	N int    `json:"n,omitempty"`
	I string `json:"i,omitempty"`
	G uint64 `json:"g,omitempty"`
}

// natsStored is a slot as the counts bucket keeps it: V as of stream seq
// S, and P, its value before S as of the cursor's base when it was
// written. A dispatcher writes the slots of a commit before the cursor:
// one that died between leaves slots ahead of the cursor, whose value at
// the cursor's base is P (loadAt).
type natsStored struct {
	S uint64   `json:"s"`
	V natsSlot `json:"v"`
	P natsSlot `json:"p"`
}

// at returns the slot's value as of base.
func (s *natsStored) at(base uint64) natsSlot {
	if s.S <= base {
		return s.V
	}
	return s.P
}

// natsJournal is one slot's change, in the order the tally made them: a
// commit writes those up to its base to the bucket.
type natsJournal struct {
	seq      uint64
	key      string
	old, new natsSlot
}

// natsTally is the cluster's state: each node's counts and incarnation,
// and the totals that decide the transitions.
type natsTally struct {
	counts  map[natsKey]natsSlot
	byNode  map[string]map[natsKey]struct{}
	nodes   map[string]natsSlot
	rooms   map[string]int
	members map[[2]string]int
	users   map[string]int
	journal []natsJournal
}

func newNATSTally() *natsTally {
	return &natsTally{counts: map[natsKey]natsSlot{}, byNode: map[string]map[natsKey]struct{}{},
		nodes: map[string]natsSlot{}, rooms: map[string]int{}, members: map[[2]string]int{}, users: map[string]int{}}
}

// Keys of the counts bucket: a count is <room>.<node>.<user> (room and
// user base64url after a letter, so that "" has one too), a node's
// incarnation n.<node>, the cursor natsCursorKey.
func natsCountKey(k natsKey) string {
	return "r" + base64.RawURLEncoding.EncodeToString([]byte(k.room)) + "." + k.node + ".u" + base64.RawURLEncoding.EncodeToString([]byte(k.user))
}

func natsNodeKey(node string) string { return "n." + node }

// parseNATSKey returns what a counts bucket key names: a count, or a node
// (isNode), or an error for another key.
func parseNATSKey(key string) (k natsKey, isNode bool, err error) {
	parts := strings.Split(key, ".")
	switch {
	case len(parts) == 2 && parts[0] == "n":
		return natsKey{node: parts[1]}, true, nil
	case len(parts) == 3 && strings.HasPrefix(parts[0], "r") && strings.HasPrefix(parts[2], "u"):
		room, rerr := base64.RawURLEncoding.DecodeString(parts[0][1:])
		user, uerr := base64.RawURLEncoding.DecodeString(parts[2][1:])
		if rerr == nil && uerr == nil && len(room) > 0 {
			return natsKey{string(room), parts[1], string(user)}, false, nil
		}
	}
	return natsKey{}, false, errors.New("not a webhook count's key: " + key)
}

// load sets a slot read from the bucket, without events or journal.
func (t *natsTally) load(key string, v natsSlot) error {
	k, isNode, err := parseNATSKey(key)
	switch {
	case err != nil:
		return err
	case isNode:
		if v.I != "" {
			t.nodes[k.node] = v
		}
	case v.N > 0:
		t.put(k, v)
		addKey(t.rooms, k.room, v.N)
		if k.user != "" {
			addKey(t.members, [2]string{k.room, k.user}, v.N)
			addKey(t.users, k.user, v.N)
		}
	}
	return nil
}

// put stores a count's slot and indexes it by node.
func (t *natsTally) put(k natsKey, v natsSlot) {
	if v.N <= 0 {
		delete(t.counts, k)
		if keys := t.byNode[k.node]; keys != nil {
			delete(keys, k)
			if len(keys) == 0 {
				delete(t.byNode, k.node)
			}
		}
		return
	}
	t.counts[k] = v
	keys := t.byNode[k.node]
	if keys == nil {
		keys = map[natsKey]struct{}{}
		t.byNode[k.node] = keys
	}
	keys[k] = struct{}{}
}

// addKey adds d to m[k], deletes it at zero, and returns the new value.
func addKey[K comparable](m map[K]int, k K, d int) int {
	n := m[k] + d
	if n <= 0 {
		delete(m, k)
		return 0
	}
	m[k] = n
	return n
}

// apply applies the change at stream seq (stored at ms, unix
// milliseconds) in epoch and returns the events it decides, numbered
// epoch:seq-i.
func (t *natsTally) apply(seq uint64, ms int64, epoch string, c *natsChange) []Event {
	var evs []Event
	emit := func(e Event) {
		e.ID = epoch + ":" + strconv.FormatUint(seq, 10) + "-" + strconv.Itoa(len(evs))
		e.Epoch, e.TimeMS = epoch, ms
		if e.Name != Reset {
			e.Node = c.Node
		}
		evs = append(evs, e)
	}
	if c.Op == natsOpEpoch {
		if c.Epoch == epoch {
			emit(Event{Name: Reset})
		}
		return evs
	}
	if c.Dropped > 0 {
		emit(Event{Name: Dropped, Count: c.Dropped})
	}
	node := t.nodes[c.Node]
	live := node.I != "" && node.I == c.Inc
	switch c.Op {
	case natsOpSync:
		if c.Begin {
			node = natsSlot{I: c.Inc, G: seq}
			t.setNode(seq, c.Node, node)
			live = true
		}
	case natsOpGone, natsOpLeave:
		if live {
			t.zero(seq, c.Node, func(natsSlot) bool { return true }, emit)
			t.setNode(seq, c.Node, natsSlot{})
		}
		return evs
	}
	for _, it := range c.Items {
		switch {
		case len(it.Msg) > 0:
			emit(Event{Name: MessagePublished, Room: it.Room, Seq: it.Seq, Message: it.Msg})
		case live:
			t.set(seq, natsKey{it.Room, c.Node, it.User}, natsSlot{N: it.Count, G: node.G}, emit)
		}
	}
	if c.Op == natsOpSync && c.End && live { // what the sync did not name leaves
		t.zero(seq, c.Node, func(v natsSlot) bool { return v.G != node.G }, emit)
	}
	return evs
}

func (t *natsTally) setNode(seq uint64, node string, v natsSlot) {
	old := t.nodes[node]
	if old == v {
		return
	}
	if v.I == "" {
		delete(t.nodes, node)
	} else {
		t.nodes[node] = v
	}
	t.journal = append(t.journal, natsJournal{seq, natsNodeKey(node), old, v})
}

// zero sets to 0 the counts of node that keep says, in the order of their
// rooms and users: the same events whoever replays it.
func (t *natsTally) zero(seq uint64, node string, keep func(natsSlot) bool, emit func(Event)) {
	var keys []natsKey
	for k := range t.byNode[node] {
		if keep(t.counts[k]) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b natsKey) int { return cmp.Or(cmp.Compare(a.room, b.room), cmp.Compare(a.user, b.user)) })
	for _, k := range keys {
		t.set(seq, k, natsSlot{}, emit)
	}
}

// set makes k's slot v, with the events of the totals' transitions, in
// the order a backend expects them (as lua/webhook.lua's set): online,
// occupied, joined on the way in; left, vacated, offline on the way out.
func (t *natsTally) set(seq uint64, k natsKey, v natsSlot, emit func(Event)) {
	if v.N <= 0 {
		v = natsSlot{}
	}
	old := t.counts[k]
	if old == v {
		return
	}
	t.put(k, v)
	t.journal = append(t.journal, natsJournal{seq, natsCountKey(k), old, v})
	d := v.N - old.N
	if d == 0 {
		return
	}
	room, user := k.room, k.user
	rt := addKey(t.rooms, room, d)
	mt, ut := 0, 0
	if user != "" {
		mt = addKey(t.members, [2]string{room, user}, d)
		ut = addKey(t.users, user, d)
	}
	if d > 0 {
		if user != "" && ut == d {
			emit(Event{Name: UserOnline, User: user})
		}
		if rt == d {
			emit(Event{Name: RoomOccupied, Room: room})
		}
		if user != "" && mt == d {
			emit(Event{Name: MemberJoined, Room: room, User: user})
		}
		return
	}
	if user != "" && mt == 0 {
		emit(Event{Name: MemberLeft, Room: room, User: user})
	}
	if rt == 0 {
		emit(Event{Name: RoomVacated, Room: room})
	}
	if user != "" && ut == 0 {
		emit(Event{Name: UserOffline, User: user})
	}
}

// natsWrite is one slot the bucket is to hold after a commit.
type natsWrite struct {
	key string
	val natsStored
}

// upTo takes the journal's changes up to base out of it and returns, per
// slot, what the bucket is to hold: its value as of base, the seq that set
// it, and its value before them (as of the last base written). Writes
// are in the order the slots first changed.
func (t *natsTally) upTo(base uint64) []natsWrite {
	n := 0
	for n < len(t.journal) && t.journal[n].seq <= base {
		n++
	}
	idx := map[string]int{}
	var out []natsWrite
	for _, j := range t.journal[:n] {
		if i, ok := idx[j.key]; ok {
			out[i].val.S, out[i].val.V = j.seq, j.new
			continue
		}
		idx[j.key] = len(out)
		out = append(out, natsWrite{j.key, natsStored{S: j.seq, V: j.new, P: j.old}})
	}
	return out
}

// dropJournal forgets the journal's first n changes (written).
func (t *natsTally) dropJournal(base uint64) {
	n := 0
	for n < len(t.journal) && t.journal[n].seq <= base {
		n++
	}
	t.journal = append(t.journal[:0], t.journal[n:]...)
}
