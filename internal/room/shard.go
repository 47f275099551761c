package room

import (
	"sync"

	"github.com/scalechat/scalechat/internal/broker"
)

const shardCount = 256 // spreads room lookups so that joins do not contend on one lock

// shard is one of the hub's maps of rooms by name, and the order in which
// the broker hears of its rooms coming and going.
//
// A room's (un)subscription is decided under mu, as the room is made or
// freed, and given to the broker after mu is let go (the broker may call
// the hub back: broker.Memory loads a room from its Subscribe). Given
// straight after the unlock, a room freed (Sweep, Drop) and made again at
// once by a join could reach the broker as Subscribe, then the freeing's
// Unsubscribe: the broker let go of a room the hub holds, whose joiners
// then waited for a load that never came. So each change is queued under
// mu and handed over in that order, one goroutine at a time (flush).
type shard struct {
	mu    sync.Mutex
	rooms map[string]*Room
	subs  []subChange // decided under mu, not yet given to the broker
	spare []subChange // the buffer flush last emptied, for subs to reuse

	// flushMu is held while subs are given to the broker: the changes of
	// one shard reach it one at a time, in the order they were decided.
	flushMu sync.Mutex
}

// subChange is a room's subscription (subscribe) or unsubscription.
type subChange struct {
	name      string
	subscribe bool
}

// queueLocked records that the broker is to (un)subscribe name, after
// every change queued before. The caller holds s.mu, and calls flush once
// it let go of it.
func (s *shard) queueLocked(name string, subscribe bool) {
	s.subs = append(s.subs, subChange{name: name, subscribe: subscribe})
}

// flush gives b every change queued so far, in order. When it returns,
// each change queued before the call has reached b, by this goroutine or
// by the one that was flushing. The caller holds no lock of the shard.
func (s *shard) flush(b broker.Broker) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	for {
		// The two buffers take turns: flushMu keeps spare this
		// goroutine's until it hands it back.
		s.mu.Lock()
		subs := s.subs
		s.subs, s.spare = s.spare[:0], nil
		s.mu.Unlock()
		if len(subs) == 0 {
			s.giveBack(subs)
			return
		}
		for _, c := range subs {
			if c.subscribe {
				b.Subscribe(c.name)
			} else {
				b.Unsubscribe(c.name)
			}
		}
		s.giveBack(subs)
	}
}

// giveBack keeps subs, emptied, for queueLocked to reuse. The caller holds
// flushMu.
func (s *shard) giveBack(subs []subChange) {
	clear(subs) // the names go
	s.mu.Lock()
	if s.spare == nil {
		s.spare = subs[:0]
	}
	s.mu.Unlock()
}
