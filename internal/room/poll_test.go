package room

import (
	"testing"
	"time"
)

// A room opened by polls is freed when its last poller leaves if it holds
// nothing; with a message, or a member, it stays (for the grace period).
func TestPollFreesTheRoomItOpened(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pollers int
		fill    func(h *Hub, r *Room)
		kept    bool
	}{
		{"one poller, nothing in it", 1, nil, false},
		{"three pollers, nothing in it", 3, nil, false},
		{"a message came", 1, func(_ *Hub, r *Room) { _, _ = r.Publish([]byte(`{"seq":}`), 7, 0, 0, 0) }, true},
		{"a member joined", 1, func(h *Hub, _ *Room) { h.Join([]byte("p"), 0, Resume{}, nil) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{NewQueue(func() {})}})
			var rooms []*Room
			for range tt.pollers {
				rooms = append(rooms, h.OpenPoll([]byte("p")))
			}
			if tt.fill != nil {
				tt.fill(h, rooms[0])
			}
			for i, r := range rooms {
				if r != rooms[0] {
					t.Fatal("two pollers of a name got two rooms")
				}
				if h.Rooms() != 1 {
					t.Fatalf("%d rooms held after %d of %d pollers left, want 1", h.Rooms(), i, len(rooms))
				}
				h.LeavePoll(r)
			}
			want := int64(0)
			if tt.kept {
				want = 1
			}
			if h.Rooms() != want || rooms[0].Closed() == tt.kept {
				t.Errorf("%d rooms held, closed %v, want %d", h.Rooms(), rooms[0].Closed(), want)
			}
		})
	}
}

// A poller keeps its room while it waits, past the grace period.
func TestSweepKeepsARoomWithPollers(t *testing.T) {
	h := newHub(t, Config{History: 10, Grace: time.Millisecond, Queues: []*Queue{NewQueue(func() {})}})
	r := h.OpenPoll([]byte("p"))
	if n := h.Sweep(time.Now().Add(time.Hour)); n != 0 || r.Closed() {
		t.Fatalf("the sweep freed %d rooms, the polled one among them", n)
	}
	h.LeavePoll(r)
	if !r.Closed() || h.Rooms() != 0 {
		t.Error("the room was not freed when its poller left")
	}
}
