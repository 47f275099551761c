//go:build linux

package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
)

func TestLoopCounts(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{1, []int{1}}, {2, []int{1, 2}}, {6, []int{1, 2, 4, 6}}, {8, []int{1, 2, 4, 8}}, {16, []int{1, 2, 4, 8, 16}},
	} {
		if got := loopCounts(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("%d CPUs: %v, want %v", tc.n, got, tc.want)
		}
	}
}

// TestResizeRooms: rooms of another size keep the first step's
// deliveries a second (rooms × size²), at least one room, and the steps'
// proportions; the scaling file's 10k a loop, or one full room when more.
func TestResizeRooms(t *testing.T) {
	steps := []loadtest.Step{{Name: "a", Rooms: 4, RoomSize: 50}, {Name: "b", Rooms: 8, RoomSize: 50}, {Name: "c", Rooms: 16, RoomSize: 50}}
	for _, tc := range []struct {
		size int
		want []int
	}{
		{50, []int{4, 8, 16}}, {100, []int{1, 2, 4}}, {500, []int{1, 2, 4}}, {25, []int{16, 32, 64}}, {60, []int{2, 4, 8}},
	} {
		got := resizeRooms(steps, tc.size)
		var rooms []int
		for _, st := range got {
			rooms = append(rooms, st.Rooms)
			if st.RoomSize != tc.size {
				t.Errorf("size %d: step %s has rooms of %d", tc.size, st.Name, st.RoomSize)
			}
		}
		if !slices.Equal(rooms, tc.want) {
			t.Errorf("size %d: rooms %v, want %v", tc.size, rooms, tc.want)
		}
	}
	if steps[0].Rooms != 4 || steps[0].RoomSize != 50 {
		t.Errorf("the file's steps changed: %+v", steps[0])
	}
}

// TestScaleRooms: a server of k loops gets k times each step's rooms (or
// clients and senders), the file's steps unchanged.
func TestScaleRooms(t *testing.T) {
	steps := []loadtest.Step{{Name: "a", Rooms: 4, RoomSize: 50}, {Name: "b", Rooms: 10, NumClients: 40, Senders: 5}}
	got := scaleRooms(steps, 4)
	if got[0].Rooms != 16 || got[0].RoomSize != 50 || got[1].Rooms != 40 || got[1].NumClients != 160 || got[1].Senders != 20 {
		t.Errorf("scaled %+v", got)
	}
	if steps[0].Rooms != 4 || steps[1].NumClients != 40 {
		t.Errorf("the file's steps changed: %+v", steps)
	}
}

// TestPlanned: every sender's message reaches its room's members.
func TestPlanned(t *testing.T) {
	for _, tc := range []struct {
		st   loadtest.Step
		want float64
	}{
		{loadtest.Step{Rooms: 4, RoomSize: 50, MsgFrequency: loadtest.Duration(time.Second)}, 10000},
		{loadtest.Step{Rooms: 1, RoomSize: 50, MsgFrequency: loadtest.Duration(500 * time.Millisecond)}, 5000},
		{loadtest.Step{Rooms: 10, RoomSize: 4, Senders: 10, MsgFrequency: loadtest.Duration(time.Second)}, 40},
		{loadtest.Step{Rooms: 10, RoomSize: 4}, 0}, // sends nothing
	} {
		if got := planned(tc.st); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.st, got, tc.want)
		}
	}
}

// TestWithLoops: a server size's run starts every setup with --loops k,
// marks its rows with k and names them with {n_loops}; the file itself
// is left as it was.
func TestWithLoops(t *testing.T) {
	sp := mustSpec(t, "name: t\nsteps:\n  - {name: a, rooms: 4, room_size: 50, bench: {servers: b}}\n"+
		"bench: {loops: each, row: \"t {n_loops}, {planned}/s\", servers: {flags: [--x]}, setups: {b: {}}, knee: {row: \"t {loops}: knee\"}}\n")
	v := sp.withLoops(2)
	if !slices.Equal(v.bench.Servers.Flags, []string{"--x", "--loops", "2"}) || !slices.Equal(v.bench.Setups["b"].Flags, []string{"--loops", "2"}) {
		t.Errorf("flags %v and %v", v.bench.Servers.Flags, v.bench.Setups["b"].Flags)
	}
	if !slices.Equal(sp.bench.Servers.Flags, []string{"--x"}) || len(sp.bench.Setups["b"].Flags) != 0 {
		t.Errorf("the file's flags changed: %v", sp.bench.Servers.Flags)
	}
	if got := v.rowName(scaleRooms(sp.sc.Steps, 2)[0]); got != "t 2 loops, 20.0k/s" {
		t.Errorf("row %q", got)
	}
	if got := sp.withLoops(1).rowName(sp.sc.Steps[0]); got != "t 1 loop, 10.0k/s" {
		t.Errorf("row %q", got)
	}
	if got := v.kneeRow(nil, "", false).Scenario; got != "t 2: knee" {
		t.Errorf("knee %q", got)
	}
	if v.fileTag() == sp.fileTag() {
		t.Errorf("a server size's files are named as the file's: %q", v.fileTag())
	}
}
