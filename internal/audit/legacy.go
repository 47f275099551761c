package audit

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// The five-field protocol has no seq and no resume: a client is in its
// room from the upgrade (the server may add it to the room a moment after
// answering it: there is no joined frame to say when), and a message is
// owed to it when it was connected from 200 ms before anyone first received
// the message until a second after.
// One it missed while away (or in that second around a cut) is what the
// protocol loses by design, reported as such; one missed while connected is
// a silent loss. Order is checked per sender (message_id increases).

// legacyMessage is message n of c as the original client sends it
// (src/client/client.go: json.Marshal of its chat.Message): the five
// fields, "room" among them. The original server sends a message to the
// clients whose URL room is its "room" field, so one without reaches
// nobody in a room, and it keeps these five fields only: "sender" and
// "message_id" are what identifies the message.
func (c *client) legacyMessage(n uint64) string {
	room, _ := json.Marshal(c.room) // a string always encodes
	return `{"message_id":` + strconv.FormatUint(n, 10) + `,"text":"audit","sender":"` + c.name +
		`","sent_at":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","room":` + string(room) + `}`
}

// span is one connection of a legacy client.
type span struct{ start, end time.Time } // start zero: before sending began; end zero: still open

type legacyState struct {
	spans  []span
	got    map[msgKey]int
	lastID map[int]uint64 // per sender: the highest message_id received
}

// legacyJoined starts a span; c.mu is held.
func (c *client) legacyJoined() {
	now := time.Now()
	if c.legacy.got == nil {
		c.legacy.got, c.legacy.lastID = map[msgKey]int{}, map[int]uint64{}
	}
	start := now
	if len(c.legacy.spans) == 0 {
		// The first join comes before anyone sends (Run waits for every
		// client): it owes nothing to the margin.
		start = time.Time{}
	}
	c.legacy.spans = append(c.legacy.spans, span{start: start})
	c.joins++
	c.connected = true
	if len(c.cuts) > len(c.rejoined) {
		c.rejoined = append(c.rejoined, now)
	}
}

// legacyFrame handles one frame of a five-field server.
func (c *client) legacyFrame(data []byte, _ *uint64) error {
	var f inFrame
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("a frame that is not JSON: %q", data)
	}
	now := time.Now()
	rest, ok := strings.CutPrefix(f.Sender, "a")
	id, err := strconv.Atoi(rest)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.Type != "" {
		return nil // a server that sends control frames anyway
	}
	if (f.Room != "" && f.Room != c.room) || !ok || err != nil || id >= len(c.a.clients) || c.a.clients[id].room != c.room {
		c.foreign++
		return nil
	}
	k := msgKey{id, f.ID}
	c.legacy.got[k]++
	dup := c.legacy.got[k] > 1
	if dup {
		c.dups = append(c.dups, now)
	}
	if f.ID < c.legacy.lastID[id] {
		c.reordered = append(c.reordered, now)
	}
	c.legacy.lastID[id] = max(c.legacy.lastID[id], f.ID)
	c.mu.Unlock()
	c.a.sawLegacy(c.id, k, c.room, now, dup)
	c.mu.Lock()
	return nil
}

// sawLegacy records that client received message k of room at t, again
// if dup.
func (a *auditor) sawLegacy(client int, k msgKey, room string, t time.Time, dup bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if dup && a.dupExample == "" {
		a.dupExample = fmt.Sprintf("a%d received %s twice in room %s (again at %s)", client, k, room, t.Format("15:04:05.000"))
	}
	if _, ok := a.delivered[k]; !ok {
		a.delivered[k] = deliveredAt{room: room}
		a.firstSeen[k] = t
	}
}

// checkLegacy counts what a five-field client owed and received.
func (a *auditor) checkLegacy(res *results.Audit, c *client, blame func(*client, time.Time) *results.AuditCounts) {
	if len(c.legacy.spans) == 0 {
		return
	}
	for k, t := range a.firstSeen {
		if a.clients[k.sender].room != c.room {
			continue
		}
		res.Expected++
		switch {
		case c.legacy.got[k] > 0:
			res.Delivered++
		case c.connectedThrough(t.Add(-200*time.Millisecond), t.Add(time.Second)):
			blame(c, t).Missing++
		default:
			res.MissedAway++
		}
	}
}

// connectedThrough reports whether one connection of c covered [from, to].
func (c *client) connectedThrough(from, to time.Time) bool {
	for _, s := range c.legacy.spans {
		if (s.start.IsZero() || !s.start.After(from)) && (s.end.IsZero() || !s.end.Before(to)) {
			return true
		}
	}
	return false
}
