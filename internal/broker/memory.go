package broker

import (
	"context"
	"sync/atomic"
)

// Memory is the broker of a single node: a message is ordered, stored and
// delivered by the node's rooms the moment it is published, with no copy
// and no goroutine in between.
type Memory struct {
	h     memoryHandler
	rooms atomic.Int64
}

var _ Broker = (*Memory)(nil)

// memoryHandler is what a single node's broker asks of its rooms: no
// ownership (every room is ordered here) and no other node's presence. It
// is no Cluster: the node's rooms know who is in them, and its server
// names the node and closes its connections itself.
type memoryHandler interface {
	DeliveryHandler
	LocalHandler
}

// LocalHandler orders a single node's messages.
type LocalHandler interface {
	// PublishLocal gives a message the room's next seq on this node and
	// delivers it to this node's members; it returns the seq, or false
	// when the room is not here (freed as the message arrived).
	PublishLocal(p Publication) (uint64, bool)
}

// NewMemory returns the broker of a single node whose rooms are h (a
// *room.Hub, or anything that delivers and orders).
func NewMemory(h interface {
	DeliveryHandler
	LocalHandler
}) *Memory {
	return &Memory{h: h}
}

// Publish implements Broker: the room orders and delivers the message
// before Publish returns.
func (m *Memory) Publish(p Publication) (uint64, error) {
	if seq, ok := m.h.PublishLocal(p); ok {
		return seq, nil
	}
	return 0, ErrDropped
}

// Subscribe implements Broker: a room of a single node starts empty, as a
// new stream.
func (m *Memory) Subscribe(room string) {
	m.rooms.Add(1)
	m.h.Loaded(room, NewEpoch(), 0, nil)
}

// Unsubscribe implements Broker.
func (m *Memory) Unsubscribe(string) { m.rooms.Add(-1) }

// Run implements Broker: it waits for ctx.
func (m *Memory) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Stats implements Broker. Messages published are not counted: no broker
// carries them (and a shared counter would cost every message a contended
// atomic add); the server counts them.
func (m *Memory) Stats() Stats { return Stats{Up: true, InStep: true, Rooms: m.rooms.Load()} }
