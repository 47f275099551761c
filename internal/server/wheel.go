//go:build linux

package server

import "time"

// wheel is a timing wheel of connections: each connection sits in the slot
// of its next check (ping, silence, closing deadline), so a sweep looks only
// at the connections that are due instead of at all of them. A connection
// moved to another slot leaves a stale entry behind, skipped when its slot
// comes.
type wheel struct {
	tick  int64 // nanoseconds per slot
	slots [][]*conn
	pos   int   // slot due at next
	next  int64 // unix nanoseconds
}

func newWheel(ping, pong time.Duration) wheel {
	tick := min(max(ping/8, 10*time.Millisecond), time.Second)
	n := int(pong/tick) + 2
	return wheel{tick: int64(tick), slots: make([][]*conn, n)}
}

func (w *wheel) start(now int64) { w.next = now + w.tick }

// add schedules c for a check at or after at. Times beyond the wheel's span
// land in its farthest slot; the check then schedules c again.
func (w *wheel) add(c *conn, at int64) {
	k := 0
	if at > w.next {
		k = int((at - w.next + w.tick - 1) / w.tick)
	}
	k = min(k, len(w.slots)-1)
	i := (w.pos + k) % len(w.slots)
	w.slots[i] = append(w.slots[i], c)
	c.slot = i
}

// advance takes the connections of the due slot and moves on by one slot.
// The caller hands the returned slice back with release.
func (w *wheel) advance() []*conn {
	i := w.pos
	due := w.slots[i]
	w.slots[i] = nil
	w.pos = (w.pos + 1) % len(w.slots)
	w.next += w.tick
	live := due[:0]
	for _, c := range due {
		if c.slot == i {
			c.slot = -1
			live = append(live, c)
		}
	}
	clear(due[len(live):])
	return live
}

// release gives a slice returned by advance back to the wheel for reuse.
func (w *wheel) release(due []*conn) {
	clear(due)
	i := (w.pos - 1 + len(w.slots)) % len(w.slots)
	if w.slots[i] == nil && cap(due) <= 4096 {
		w.slots[i] = due[:0]
	}
}
