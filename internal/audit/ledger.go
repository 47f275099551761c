package audit

import (
	"fmt"
	"slices"
	"time"
)

// The ledger knows every message twice: by who sent it (sender and
// message_id, which the audit's clients make unique) and by where the
// server put it (room, epoch, seq). Counting owed deliveries per seq alone
// cannot see two nodes that hand out the same seq to two messages during a
// Redis outage: each member then "has" every seq and misses half the
// messages. So what a member owes is counted per message, from what was
// sent, and a seq that names two messages is a broken order of its own.

// position is where the server put a message: a seq of one stream (epoch)
// of a room.
type position struct {
	room, epoch string
	seq         uint64
}

func (p position) String() string {
	return fmt.Sprintf("seq %d of epoch %s in room %s", p.seq, p.epoch, p.room)
}

func (k msgKey) String() string { return fmt.Sprintf("a%d's message %d", k.sender, k.counter) }

// sighting is a message and the client that received it.
type sighting struct {
	key    msgKey
	client int
}

// message is what the run saw of one message some client received: the
// server accepted it (its sender got the echo, or another member got it).
type message struct {
	room  string
	first time.Time  // when a client first received it: the time of a loss, for blame
	at    []position // every position it was received at (two: a broken order)
}

// ledger is the auditor's record of messages; the auditor's mu guards it.
type ledger struct {
	msgs   map[msgKey]*message
	byRoom map[string][]msgKey         // the room's messages, in the order first received
	named  map[position]sighting       // the first message received at each position, and by whom
	twice  map[position]struct{}       // positions a second, different message was received at
	got    map[int]map[msgKey]position // per client id: the messages it received, where first
	// again are the times a client received a message it had already
	// received at another position: a duplicate the per-seq count cannot
	// see (the same message ordered twice).
	again map[int][]time.Time
	// afterReset counts the messages a client received again under
	// another epoch: the room started anew (a takeover, Redis's data lost)
	// and the client, told so with reset, got the new stream's history,
	// which holds what it had. The protocol tells it (reset); a client
	// that must not show a message twice drops them by message_id.
	afterReset int64
	// The examples name the first of each anomaly, with who received
	// what where and when, to find in the nodes' logs: a position naming
	// two messages, a message under two seqs, a message a client received
	// twice.
	twiceExample, conflictExample, dupExample string
}

func newLedger() ledger {
	return ledger{msgs: map[msgKey]*message{}, byRoom: map[string][]msgKey{}, named: map[position]sighting{},
		twice: map[position]struct{}{}, got: map[int]map[msgKey]position{}, again: map[int][]time.Time{}}
}

// sawMessage records that client got message k as seq of room's stream
// epoch at t. A second, different seq for the same message is a conflict
// (two orders), and a duplicate for a client that receives it at both; a
// second, different message at the same seq is a seq that names two
// messages.
func (a *auditor) sawMessage(client int, k msgKey, room, epoch string, seq uint64, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.got[client] == nil {
		a.got[client] = map[msgKey]position{}
	}
	pos := position{room, epoch, seq}
	if had, ok := a.got[client][k]; !ok {
		a.got[client][k] = pos
	} else if had.epoch != pos.epoch {
		a.afterReset++
		a.got[client][k] = pos
	} else {
		a.sawAgain(client, k, had, pos, t)
	}
	m := a.msgs[k]
	if m == nil {
		m = &message{room: room, first: t}
		a.msgs[k] = m
		a.byRoom[room] = append(a.byRoom[room], k)
	}
	if !slices.Contains(m.at, pos) {
		m.at = append(m.at, pos)
	}
	a.sawAt(client, k, pos, t)
	a.sawOrdered(client, k, pos, t)
}

// sawAt records that client received k at pos: a position that names a
// second message is a broken order. The caller holds a.mu.
func (a *auditor) sawAt(client int, k msgKey, pos position, t time.Time) {
	switch other, ok := a.named[pos]; {
	case !ok:
		a.named[pos] = sighting{k, client}
	case other.key != k:
		if _, dup := a.twice[pos]; !dup {
			a.twice[pos] = struct{}{}
			if a.twiceExample == "" {
				a.twiceExample = fmt.Sprintf("%s was %s (received by a%d) and %s (received by a%d at %s)",
					pos, other.key, other.client, k, client, t.Format("15:04:05.000"))
			}
		}
	}
}

// sawOrdered records where client received k: a second seq (or room) for
// the same message is a conflict, a broken order. The caller holds a.mu.
func (a *auditor) sawOrdered(client int, k msgKey, pos position, t time.Time) {
	d, ok := a.delivered[k]
	if !ok {
		a.delivered[k] = deliveredAt{room: pos.room, epoch: pos.epoch, seq: pos.seq, client: client}
		return
	}
	if d.room != pos.room || d.seq != pos.seq {
		a.conflicts++
		if a.conflictExample == "" {
			first := position{d.room, d.epoch, d.seq}
			a.conflictExample = fmt.Sprintf("%s was %s (received by a%d) and %s (received by a%d at %s)",
				k, first, d.client, pos, client, t.Format("15:04:05.000"))
		}
	}
}

// sawAgain records that client received message k, which it had at had
// in the same epoch, again at pos: a duplicate, whether pos is had (the
// same seq twice, which the client counts) or another seq (the same
// message ordered twice, counted here). The caller holds a.mu.
func (a *auditor) sawAgain(client int, k msgKey, had, pos position, t time.Time) {
	if had != pos {
		a.again[client] = append(a.again[client], t)
	}
	if a.dupExample != "" {
		return
	}
	where := "at " + pos.String()
	if had != pos {
		where = "at " + had.String() + " and at " + pos.String()
	}
	a.dupExample = fmt.Sprintf("a%d received %s twice, %s (again at %s)", client, k, where, t.Format("15:04:05.000"))
}

// owed is what message m means to member c once the run is over.
type owed int

const (
	owedDelivered owed = iota // c received it
	owedFlagged               // c was told it missed it: a history_gap (or reset) covers one of its positions
	owedMissing               // a silent loss
	notOwed                   // it came before c first joined the room
)

// owes says what m is to c; c has stopped, so its fields are read without
// its lock.
func (a *auditor) owes(c *client, k msgKey, m *message) owed {
	if _, ok := a.got[c.id][k]; ok {
		return owedDelivered
	}
	if len(c.order) > 0 {
		// Before c's first joined frame the room's messages were not its to get.
		first := c.order[0]
		for _, p := range m.at {
			if p.epoch == first && p.seq <= c.streams[first].first {
				return notOwed
			}
		}
	}
	for _, p := range m.at {
		if s := c.streams[p.epoch]; s != nil && inGap(s.gaps, p.seq) {
			return owedFlagged
		}
	}
	return owedMissing
}
