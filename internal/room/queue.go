package room

import "sync"

// Delivery asks an event loop to send a room's message to the loop's local
// members of that room, or, with Ready set, tells the loop that the room has
// loaded and its waiting joiners may join now, or, with Dropped set, that
// the room was dropped and its members must be closed, or, with Presence
// set, carries a presence event.
type Delivery struct {
	Room *Room
	Message
	Ready   bool
	Dropped bool
	// Presence, when set, is a presence_join or presence_leave frame (its
	// JSON) for the members that asked for presence events.
	Presence []byte
	Received int64 // unix nanoseconds when the message was read, for the processing time; 0 when unknown
}

// Queue carries deliveries from publishers (any goroutine) to the one event
// loop that owns it. Rooms push in seq order while holding their lock, so
// each room's messages come out of a queue in seq order.
type Queue struct {
	mu    sync.Mutex
	items []Delivery
	wake  func()
}

// NewQueue returns a queue that calls wake after a push, so that the owning
// loop comes to drain it. wake must be cheap when a wake-up is pending.
func NewQueue(wake func()) *Queue { return &Queue{wake: wake} }

// push queues d and, when wake is set, wakes the owning loop.
func (q *Queue) push(d Delivery, wake bool) {
	q.mu.Lock()
	q.items = append(q.items, d)
	q.mu.Unlock()
	if wake {
		q.wake()
	}
}

// wakeIfPending wakes the owning loop when deliveries wait for it: after
// pushes made without a wake (Hub.DeliverMany). A loop that drained them
// meanwhile needs none.
func (q *Queue) wakeIfPending() {
	q.mu.Lock()
	n := len(q.items)
	q.mu.Unlock()
	if n > 0 {
		q.wake()
	}
}

// Swap takes every queued delivery, handing the queue buf (emptied) to fill
// next, so that two buffers alternate without allocating.
func (q *Queue) Swap(buf []Delivery) []Delivery {
	clear(buf)
	q.mu.Lock()
	items := q.items
	q.items = buf[:0]
	q.mu.Unlock()
	return items
}
