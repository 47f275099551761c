package broker

import (
	"maps"
	"slices"
	"testing"
)

// presenceState keeps, per room and user, the last count this node
// reported, so that after an outage it writes again exactly what holds now.
func TestPresenceStateKeepsTheLastReport(t *testing.T) {
	for _, tt := range []struct {
		name    string
		reports []job // room, user, e.Seq: the count reported
		want    map[string]map[string]int
	}{
		{"nothing", nil, map[string]map[string]int{}},
		{"one user", []job{{room: "a", user: "u", e: Entry{Seq: 2}}}, map[string]map[string]int{"a": {"u": 2}}},
		{"the last count wins", []job{{room: "a", user: "u", e: Entry{Seq: 2}}, {room: "a", user: "u", e: Entry{Seq: 1}}},
			map[string]map[string]int{"a": {"u": 1}}},
		{"zero forgets the user and an empty room",
			[]job{{room: "a", user: "u", e: Entry{Seq: 2}}, {room: "a", user: "v", e: Entry{Seq: 1}}, {room: "a", user: "u"}, {room: "b", user: "w", e: Entry{Seq: 1}}, {room: "b", user: "w"}},
			map[string]map[string]int{"a": {"v": 1}}},
		{"zero for someone never reported", []job{{room: "a", user: "u"}}, map[string]map[string]int{}},
		{"anonymous connections", []job{{room: "a", user: "", e: Entry{Seq: 3}}}, map[string]map[string]int{"a": {"": 3}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newPresenceState()
			for _, r := range tt.reports {
				s.report(r.room, r.user, int(r.e.Seq))
			}
			got := map[string]map[string]int{}
			for _, j := range s.jobs() {
				if j.kind != jobPresence {
					t.Fatalf("job of kind %d", j.kind)
				}
				if got[j.room] == nil {
					got[j.room] = map[string]int{}
				}
				got[j.room][j.user] = int(j.e.Seq)
			}
			if !maps.EqualFunc(got, tt.want, maps.Equal) {
				t.Errorf("rewrites %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPresenceStateFollowsPeersUntilForgotten(t *testing.T) {
	s := newPresenceState()
	s.follow("n1")
	s.follow("n2")
	s.follow("n1")
	got := s.following()
	slices.Sort(got)
	if !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("following %v, want [n1 n2]", got)
	}
	s.forget("n1")
	if got := s.following(); !slices.Equal(got, []string{"n2"}) {
		t.Errorf("after forgetting n1: following %v, want [n2]", got)
	}
}
