package room

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

const shardCount = 256 // spreads room lookups so that joins do not contend on one lock

type shard struct {
	mu    sync.Mutex
	rooms map[string]*Room
}

// Hub is the set of rooms of one node.
type Hub struct {
	shards  [shardCount]shard
	queues  []*Queue
	history int
	grace   time.Duration

	rooms          atomic.Int64
	historyEntries atomic.Int64
}

// NewHub returns a hub whose rooms keep the last history messages each and
// are freed once empty for grace. queues holds one Queue per event loop;
// loop indices passed to Join and Leave index it.
func NewHub(history int, grace time.Duration, queues []*Queue) *Hub {
	h := &Hub{queues: queues, history: history, grace: grace}
	for i := range h.shards {
		h.shards[i].rooms = make(map[string]*Room)
	}
	return h
}

func (h *Hub) shard(name []byte) *shard {
	// FNV-1a
	x := uint32(2166136261)
	for _, c := range name {
		x ^= uint32(c)
		x *= 16777619
	}
	return &h.shards[x%shardCount]
}

// Join makes a connection on loop a member of the room called name, creating
// the room when needed, and returns the room and what the member should be
// sent first (see JoinResult). History messages are appended to dst.
func (h *Hub) Join(name []byte, loop int, since uint64, hasSince bool, dst []Message) (*Room, JoinResult) {
	s := h.shard(name)
	for {
		s.mu.Lock()
		r := s.rooms[string(name)]
		if r == nil {
			r = &Room{name: string(name), hub: h, hist: newHistory(h.history), local: make([]int32, len(h.queues))}
			s.rooms[r.name] = r
			h.rooms.Add(1)
		}
		s.mu.Unlock()
		if res, ok := r.join(loop, since, hasSince, dst); ok {
			return r, res
		}
	}
}

// Lookup returns the room called name, or nil when it does not exist.
func (h *Hub) Lookup(name []byte) *Room {
	s := h.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rooms[string(name)]
}

// Rooms returns the number of rooms held, empty ones in their grace period
// included.
func (h *Hub) Rooms() int64 { return h.rooms.Load() }

// HistoryEntries returns the number of messages held in all histories.
func (h *Hub) HistoryEntries() int64 { return h.historyEntries.Load() }

// Sweep frees the rooms that have been empty for the grace period and
// returns how many it freed.
func (h *Hub) Sweep(now time.Time) int {
	freed := 0
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		for name, r := range s.rooms {
			r.mu.Lock()
			if r.members == 0 && now.Sub(r.emptySince) >= h.grace {
				r.closed = true
				delete(s.rooms, name)
				h.historyEntries.Add(-int64(r.hist.n))
				r.hist = history{}
				freed++
			}
			r.mu.Unlock()
		}
		s.mu.Unlock()
	}
	h.rooms.Add(-int64(freed))
	return freed
}

// Run sweeps empty rooms until ctx is done.
func (h *Hub) Run(ctx context.Context) {
	every := h.grace / 2
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	if every > 10*time.Second {
		every = 10 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.Sweep(now)
		}
	}
}
