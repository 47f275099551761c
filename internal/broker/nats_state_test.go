package broker

import (
	"slices"
	"testing"
	"time"
)

// TestNATSStateSweep: a room that asked its owner for a snapshot asks
// again after natsAskAgain and is dropped after natsStuckWait; publishes
// that waited past the bound are taken out to be given up; a room that
// waits for nothing is left alone.
func TestNATSStateSweep(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name      string
		rs        natsRoomState
		at        []time.Duration // sweeps after t0
		ask, drop bool            // at the last sweep
		late      int
	}{
		{"held: nothing", natsRoomState{role: natsOwned}, []time.Duration{0, 20 * time.Second}, false, false, 0},
		{"followed in step: nothing", natsRoomState{role: natsFollowing, owner: "n"}, []time.Duration{0, 20 * time.Second}, false, false, 0},
		{"resync: first seen", natsRoomState{role: natsFollowing, owner: "n", resync: true}, []time.Duration{0}, false, false, 0},
		{"resync: asks again", natsRoomState{role: natsFollowing, owner: "n", resync: true}, []time.Duration{0, 1500 * time.Millisecond}, true, false, 0},
		{"loading: dropped at last", natsRoomState{role: natsLoading, owner: "n"}, []time.Duration{0, 3 * time.Second, 9 * time.Second}, false, true, 0},
		{"loading, holder unknown: nothing", natsRoomState{role: natsLoading}, []time.Duration{0, 20 * time.Second}, false, false, 0},
		{"publishes waited too long", natsRoomState{role: natsLoading, waiting: []Publication{{}, {}}, waitingSince: t0}, []time.Duration{3 * time.Second}, false, false, 2},
		{"publishes not yet", natsRoomState{role: natsLoading, waiting: []Publication{{}}, waitingSince: t0}, []time.Duration{time.Second}, false, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s natsState
			s.init()
			rs := c.rs
			s.rooms["r"] = &rs
			var ask, drop []string
			var late []Publication
			for _, d := range c.at {
				ask, drop, late = s.sweep(t0.Add(d), natsForwardWait)
			}
			if slices.Contains(ask, "r") != c.ask || slices.Contains(drop, "r") != c.drop || len(late) != c.late {
				t.Errorf("ask %v drop %v late %d; want ask %v drop %v late %d", ask, drop, len(late), c.ask, c.drop, c.late)
			}
		})
	}
}
