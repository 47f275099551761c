package webhook

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is a single node's Tracker and Source: the node is where the truth
// is, so it decides each event under one lock and queues it (bounded) for
// the Dispatcher. The queue does not outlive the process: events not sent
// when it stops are lost, and the next start begins with a Reset.
type Memory struct {
	epoch    string
	max      int
	maxBytes int64
	log      *slog.Logger

	mu      sync.Mutex
	conns   map[string]map[string]int // room → user → connections
	rooms   map[string]int            // room → connections
	users   map[string]int            // user → connections in any room
	queue   []Event                   // queue[head:] wait to be sent
	bytes   int64                     // what queue[head:] holds, as eventSize counts it
	head    int                       // events before it were sent
	next    uint64                    // the next event's number
	gap     uint64                    // events dropped since the last one queued: a Dropped event goes first
	wake    chan struct{}             // signalled when events are queued
	dropped atomic.Uint64
	drops   dropLog
}

var (
	_ Tracker = (*Memory)(nil)
	_ Source  = (*Memory)(nil)
)

// DefaultQueueBytes is a queue's bound in bytes when none is given: 10,000
// published messages of 16 KiB held 250 MB before there was one.
const DefaultQueueBytes = 64 << 20

// eventSize is what an event costs queued, roughly: its strings and
// message, and the struct around them.
func eventSize(e *Event) int64 {
	return int64(len(e.Message)+len(e.Room)+len(e.User)+len(e.ID)) + 160
}

// NewMemory returns a single node's tracker whose queue holds up to max
// events and maxBytes bytes (0: DefaultQueueBytes); epoch names this run (a
// Reset opens it).
func NewMemory(epoch string, max int, maxBytes int64, log *slog.Logger) *Memory {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultQueueBytes
	}
	m := &Memory{epoch: epoch, max: max, maxBytes: maxBytes, log: log, conns: map[string]map[string]int{},
		rooms: map[string]int{}, users: map[string]int{}, wake: make(chan struct{}, 1)}
	m.mu.Lock()
	m.emitLocked(Event{Name: Reset})
	m.mu.Unlock()
	return m
}

// Presence implements Tracker.
func (m *Memory) Presence(room, user string, count int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	users := m.conns[room]
	old := users[user]
	if count == old {
		return
	}
	switch {
	case count > 0 && users == nil:
		m.conns[room] = map[string]int{user: count}
	case count > 0:
		users[user] = count
	default:
		delete(users, user)
		if len(users) == 0 {
			delete(m.conns, room)
		}
	}
	for _, e := range transitions(room, user, count-old, m.rooms, m.users, old) {
		m.emitLocked(e)
	}
}

// transitions applies delta (this node's change of user's connections in
// room, which were old) to the totals and returns the events it makes, in
// the order a backend expects them: online, occupied, joined on the way in;
// left, vacated, offline on the way out. On a single node a user's
// connections in a room are the member count.
func transitions(room, user string, delta int, rooms, users map[string]int, old int) []Event {
	var evs []Event
	rt := add(rooms, room, delta)
	ut := 0
	if user != "" {
		ut = add(users, user, delta)
	}
	named := user != ""
	if delta > 0 {
		if named && ut == delta {
			evs = append(evs, Event{Name: UserOnline, User: user})
		}
		if rt == delta {
			evs = append(evs, Event{Name: RoomOccupied, Room: room})
		}
		if named && old == 0 {
			evs = append(evs, Event{Name: MemberJoined, Room: room, User: user})
		}
		return evs
	}
	if named && old+delta == 0 {
		evs = append(evs, Event{Name: MemberLeft, Room: room, User: user})
	}
	if rt == 0 {
		evs = append(evs, Event{Name: RoomVacated, Room: room})
	}
	if named && ut == 0 {
		evs = append(evs, Event{Name: UserOffline, User: user})
	}
	return evs
}

// add adds delta to m[k], deletes it at zero, and returns the new value.
func add(m map[string]int, k string, delta int) int {
	n := m[k] + delta
	if n <= 0 {
		delete(m, k)
		return 0
	}
	m[k] = n
	return n
}

// Published implements Tracker.
func (m *Memory) Published(room string, seq uint64, message []byte) {
	m.mu.Lock()
	m.emitLocked(Event{Name: MessagePublished, Room: room, Seq: seq, Message: message})
	m.mu.Unlock()
}

// emitLocked queues e, or counts it dropped when the queue is full. The
// first event queued after drops follows a Dropped event that counts them:
// the backend sees the gap.
func (m *Memory) emitLocked(e Event) {
	free := m.max - (len(m.queue) - m.head)
	need := eventSize(&e)
	if m.gap > 0 {
		free-- // the Dropped event's place
		need += eventSize(&Event{})
	}
	if free <= 0 || m.bytes+need > m.maxBytes && m.head < len(m.queue) {
		m.gap++
		m.dropped.Add(1)
		m.drops.note(m.log, e.Name)
		return
	}
	if m.gap > 0 {
		m.appendLocked(Event{Name: Dropped, Count: m.gap})
		m.gap = 0
	}
	m.appendLocked(e)
}

// appendLocked numbers e and queues it.
func (m *Memory) appendLocked(e Event) {
	m.next++
	e.ID = m.epoch + "-" + strconv.FormatUint(m.next, 10)
	e.Epoch = m.epoch
	e.TimeMS = time.Now().UnixMilli()
	m.queue = append(m.queue, e)
	m.bytes += eventSize(&e)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Next implements Source.
func (m *Memory) Next(ctx context.Context, max int) ([]Event, error) {
	for {
		m.mu.Lock()
		n := min(len(m.queue)-m.head, max)
		evs := append([]Event(nil), m.queue[m.head:m.head+n]...)
		m.mu.Unlock()
		if n > 0 {
			return evs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.wake:
		}
	}
}

// Commit implements Source: the dispatcher is the queue's one reader, so
// evs are the queue's first events. The sent ones are let go once they are
// half the queue: a commit costs no copy of a long backlog.
func (m *Memory) Commit(_ context.Context, evs []Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range evs {
		m.bytes -= eventSize(&m.queue[m.head+i])
	}
	m.head += len(evs)
	if m.head >= len(m.queue)/2 {
		n := copy(m.queue, m.queue[m.head:])
		clear(m.queue[n:])
		m.queue, m.head = m.queue[:n], 0
	}
	return nil
}

// Stats implements Source.
func (m *Memory) Stats() Stats {
	m.mu.Lock()
	q, b := len(m.queue)-m.head, m.bytes
	m.mu.Unlock()
	return Stats{Queued: int64(q), QueuedBytes: b, Dropped: m.dropped.Load()}
}

// dropLog logs dropped events at most once every ten seconds, with how many
// were dropped since the last line: a drop is never silent, nor a flood.
type dropLog struct {
	mu    sync.Mutex
	last  time.Time
	since int
}

func (d *dropLog) note(log *slog.Logger, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.since++
	if now := time.Now(); now.Sub(d.last) >= 10*time.Second {
		log.Warn("webhook events dropped: the queue is full, in events or bytes (the backend is slow or down)", "dropped", d.since, "last", name)
		d.last, d.since = now, 0
	}
}
