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
	named  map[position]msgKey         // the first message received at each position
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
	// twiceExample describes the first position found naming two messages.
	twiceExample string
}

func newLedger() ledger {
	return ledger{msgs: map[msgKey]*message{}, byRoom: map[string][]msgKey{}, named: map[position]msgKey{},
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
	} else if had != pos {
		a.again[client] = append(a.again[client], t)
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
	switch other, ok := a.named[pos]; {
	case !ok:
		a.named[pos] = k
	case other != k:
		if _, dup := a.twice[pos]; !dup {
			a.twice[pos] = struct{}{}
			if a.twiceExample == "" {
				a.twiceExample = fmt.Sprintf("seq %d of epoch %s in room %s was a%d's message %d and a%d's message %d",
					seq, epoch, room, other.sender, other.counter, k.sender, k.counter)
			}
		}
	}
	d, ok := a.delivered[k]
	if !ok {
		a.delivered[k] = deliveredAt{room, seq}
		return
	}
	if d.room != room || d.seq != seq {
		a.conflicts++
	}
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
