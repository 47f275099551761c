package broker

import (
	"slices"
	"testing"
	"time"
)

// TestDueForKeepAlive: which loaded rooms a look renews, and when the next
// look comes.
func TestDueForKeepAlive(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	hour := RoomConfig{TTL: time.Hour} // renewed every 15 minutes
	tests := []struct {
		name  string
		rooms map[string]*roomState
		limit int
		due   []string
		next  time.Duration
	}{
		{"none loaded", map[string]*roomState{}, 10, nil, keepAliveMax},
		{"kept a while ago", map[string]*roomState{
			"old":    {rc: hour, kept: now.Add(-16 * time.Minute)},
			"recent": {rc: hour, kept: now.Add(-time.Minute)},
		}, 10, []string{"old"}, keepAliveMax},
		{"a publish renewed it", map[string]*roomState{
			"r": {rc: hour, kept: now.Add(-20 * time.Minute), renewed: now.Add(-time.Minute)},
		}, 10, nil, keepAliveMax},
		{"not loaded, unsynced or leaving", map[string]*roomState{
			"loading":  {rc: hour},
			"unsynced": {rc: hour, kept: now.Add(-time.Hour), unsynced: true},
			"leaving":  {rc: hour, kept: now.Add(-time.Hour), leaving: true},
		}, 10, nil, keepAliveMax},
		{"a short TTL looks sooner", map[string]*roomState{
			"short": {rc: RoomConfig{TTL: 8 * time.Second}, kept: now.Add(-time.Second)},
		}, 10, nil, time.Second},
		{"a tiny TTL looks no sooner than keepAliveMin", map[string]*roomState{
			"tiny": {rc: RoomConfig{TTL: 400 * time.Millisecond}, kept: now},
		}, 10, nil, keepAliveMin},
		{"the limit cuts the list", map[string]*roomState{
			"a": {rc: hour, kept: now.Add(-time.Hour)},
			"b": {rc: hour, kept: now.Add(-time.Hour)},
		}, 1, []string{"?"}, keepAliveMin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSubscriptions()
			s.rooms = tt.rooms
			due, next := s.dueForKeepAlive(now, tt.limit)
			var names []string
			for _, r := range due {
				names = append(names, r.name)
				if r.ttl != s.rooms[r.name].rc.TTL+renewInterval(s.rooms[r.name].rc.TTL) {
					t.Errorf("%s renewed for %v", r.name, r.ttl)
				}
				if !s.rooms[r.name].kept.Equal(now) {
					t.Errorf("%s not marked kept at now", r.name)
				}
			}
			if slices.Equal(tt.due, []string{"?"}) { // one of them, either
				if len(names) != 1 {
					t.Errorf("due %v, want one room", names)
				}
			} else if !slices.Equal(names, tt.due) {
				t.Errorf("due %v, want %v", names, tt.due)
			}
			if next != tt.next {
				t.Errorf("next look in %v, want %v", next, tt.next)
			}
		})
	}
}
