package room

import (
	"strings"
	"testing"
	"time"
)

// optionsHub returns a hub whose rooms take their options by the first
// letter of their name, as a server's namespaces would give them.
func optionsHub(t *testing.T, q *Queue) *Hub {
	t.Helper()
	return newHub(t, Config{History: 10, Grace: time.Minute, Queues: []*Queue{q}, Options: func(name string) Options {
		switch {
		case strings.HasPrefix(name, "nohist:"):
			return Options{History: 0}
		case strings.HasPrefix(name, "ttl:"):
			return Options{History: 10, HistoryTTL: time.Minute}
		case strings.HasPrefix(name, "nopres:"):
			return Options{History: 10, NoPresence: true}
		case strings.HasPrefix(name, "noevents:"):
			return Options{History: 10, NoJoinLeave: true}
		case strings.HasPrefix(name, "two:"):
			return Options{History: 10, MaxMembers: 2}
		}
		return Options{History: 10}
	}})
}

func TestRoomOptionsHistory(t *testing.T) {
	h := optionsHub(t, NewQueue(func() {}))
	for _, tc := range []struct {
		room string
		want int
	}{{"plain", 5}, {"nohist:a", 0}, {"ttl:a", 5}} {
		r, _ := h.Join([]byte(tc.room), 0, Resume{}, nil)
		for range 5 {
			if _, err := r.Publish([]byte(`{"seq":}`), 7, 0, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, res := h.Join([]byte(tc.room), 0, Resume{}, nil); len(res.History) != tc.want {
			t.Errorf("%s: a joiner gets %d messages, want %d", tc.room, len(res.History), tc.want)
		}
	}
	if h.HistoryEntries() != 10 {
		t.Errorf("history entries %d, want 10", h.HistoryEntries())
	}
}

// A history whose last message is older than the namespace's TTL is
// dropped when it is next read, and its bytes given back.
func TestRoomOptionsHistoryTTL(t *testing.T) {
	h := optionsHub(t, NewQueue(func() {}))
	r, _ := h.Join([]byte("ttl:a"), 0, Resume{}, nil)
	r.Publish([]byte(`{"seq":}`), 7, 0, 0, 0)
	if p := r.Poll(Resume{}, nil); len(p.Messages) != 1 {
		t.Fatalf("a fresh message: poll got %d, want 1", len(p.Messages))
	}
	r.mu.Lock()
	r.lastMsg = time.Now().Add(-time.Minute - time.Second)
	r.mu.Unlock()
	if p := r.Poll(Resume{}, nil); len(p.Messages) != 0 {
		t.Errorf("a message past the TTL: poll got %d, want 0", len(p.Messages))
	}
	if _, res := h.Join([]byte("ttl:a"), 0, Resume{}, nil); len(res.History) != 0 || res.Seq != 1 {
		t.Errorf("a joiner got %d messages at seq %d, want none at seq 1", len(res.History), res.Seq)
	}
	if h.HistoryEntries() != 0 || h.HistoryBytes() != 0 {
		t.Errorf("history held: %d entries, %d bytes; want 0", h.HistoryEntries(), h.HistoryBytes())
	}
}

func TestRoomOptionsPresence(t *testing.T) {
	q := NewQueue(func() {})
	h := optionsHub(t, q)
	for _, tc := range []struct {
		room         string
		users        int
		presenceEvts int
	}{{"plain", 1, 2}, {"nopres:a", 0, 0}, {"noevents:a", 1, 0}} {
		r, _ := h.Join([]byte(tc.room), 0, Resume{}, nil)
		r.AddUser("ann")
		_, users, _ := r.Presence()
		r.RemoveUser("ann")
		events := 0
		for _, d := range q.Swap(nil) {
			if d.Presence != nil {
				events++
			}
		}
		if len(users) != tc.users || events != tc.presenceEvts {
			t.Errorf("%s: %d users in presence, %d presence events; want %d and %d", tc.room, len(users), events, tc.users, tc.presenceEvts)
		}
	}
}

// MaxMembers counts this node's members and the connections other nodes
// report.
func TestRoomOptionsMaxMembers(t *testing.T) {
	h := optionsHub(t, NewQueue(func() {}))
	r, res := h.Join([]byte("two:a"), 0, Resume{}, nil)
	if res.MembersFull {
		t.Fatal("the first member refused")
	}
	if _, res := h.Join([]byte("two:a"), 0, Resume{}, nil); res.MembersFull {
		t.Fatal("the second member refused")
	}
	if _, res := h.Join([]byte("two:a"), 0, Resume{}, nil); !res.MembersFull || res.Members != 0 {
		t.Fatalf("the third member: %+v, want refused", res)
	}
	r.Leave(0)
	h.RemotePresence("two:a", "other-node", "bob", 1)
	if _, res := h.Join([]byte("two:a"), 0, Resume{}, nil); !res.MembersFull {
		t.Error("a member beyond the cap, counting another node's: not refused")
	}
	h.RemotePresence("two:a", "other-node", "bob", 0)
	if _, res := h.Join([]byte("two:a"), 0, Resume{}, nil); res.MembersFull {
		t.Error("a member within the cap once the other node's left: refused")
	}
	if r.Members() != 2 {
		t.Errorf("members %d, want 2", r.Members())
	}
}
