package room

import (
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
)

// orderBroker is broker.Memory (each room loads at once) that records which
// rooms are subscribed, in the order the calls reach it, and runs
// onUnsubscribe, once, inside the first Unsubscribe.
type orderBroker struct {
	broker.Broker
	mu            sync.Mutex
	subscribed    map[string]bool
	onUnsubscribe func(room string)
}

func (b *orderBroker) Subscribe(room string) {
	b.Broker.Subscribe(room)
	b.mu.Lock()
	b.subscribed[room] = true
	b.mu.Unlock()
}

func (b *orderBroker) Unsubscribe(room string) {
	b.mu.Lock()
	hook := b.onUnsubscribe
	b.onUnsubscribe = nil
	b.mu.Unlock()
	if hook != nil {
		hook(room)
	}
	b.Broker.Unsubscribe(room)
	b.mu.Lock()
	b.subscribed[room] = false
	b.mu.Unlock()
}

func (b *orderBroker) isSubscribed(room string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.subscribed[room]
}

// A room freed and at once made again by a join (a member closed with 1012
// by Drop rejoins straight away; a join comes as Sweep frees the room) is
// subscribed at the end: the freeing's Unsubscribe reaches the broker
// before the new room's Subscribe. The join is made while the broker is
// inside that Unsubscribe, the widest the window between the two can be.
// Before the shard queued its changes, the Subscribe went first and the
// broker let go of a room the hub held: its joiners waited for a load that
// never came (TestClusterOwnedRoomTakenOverClosesItsMembers, 3 runs in 60
// beside a busy CPU).
func TestFreedRoomMadeAgainStaysSubscribed(t *testing.T) {
	for _, tt := range []struct {
		name string
		free func(h *Hub)
	}{
		{"swept", func(h *Hub) {
			if n := h.Sweep(time.Now().Add(time.Hour)); n != 1 {
				t.Fatalf("swept %d rooms, want 1", n)
			}
		}},
		{"dropped", func(h *Hub) {
			if !h.Drop("r", nil) {
				t.Fatal("room not dropped")
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b *orderBroker
			h := newHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})},
				Broker: func(h broker.Handler) (broker.Broker, error) {
					b = &orderBroker{Broker: broker.NewMemory(h.(*Hub)), subscribed: map[string]bool{}}
					return b, nil
				}})
			h.Open([]byte("r"))
			opened := make(chan struct{})
			b.onUnsubscribe = func(room string) {
				go func() {
					defer close(opened)
					h.Open([]byte(room))
				}()
				// The new room's Subscribe must wait for this Unsubscribe:
				// its Open cannot end first. Bounded, since with the order
				// kept it never ends here.
				select {
				case <-opened:
				case <-time.After(100 * time.Millisecond):
				}
			}
			tt.free(h)
			select {
			case <-opened:
			case <-time.After(10 * time.Second):
				t.Fatal("the broker was never told to unsubscribe the room freed")
			}
			if h.Lookup([]byte("r")) == nil || !b.isSubscribed("r") {
				t.Fatalf("room held %v, subscribed %v: want both", h.Lookup([]byte("r")) != nil, b.isSubscribed("r"))
			}
		})
	}
}
