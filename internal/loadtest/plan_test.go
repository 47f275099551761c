//go:build linux

package loadtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

func TestRoomCounts(t *testing.T) {
	tests := []struct {
		rooms, clients int
		skew           float64
		want           []int
	}{
		{3, 9, 0, []int{3, 3, 3}},
		{3, 10, 0, []int{4, 3, 3}},
		{4, 100, 1, []int{48, 24, 16, 12}},
		{2, 3, 3, []int{3, 0}},
	}
	for _, tt := range tests {
		got := roomCounts(tt.rooms, tt.clients, tt.skew)
		sum := 0
		for i, n := range got {
			sum += n
			if n != tt.want[i] {
				t.Errorf("roomCounts(%d, %d, %v) = %v, want %v", tt.rooms, tt.clients, tt.skew, got, tt.want)
				break
			}
		}
		if sum != tt.clients {
			t.Errorf("counts sum to %d, want %d", sum, tt.clients)
		}
	}
}

func TestStepPlan(t *testing.T) {
	cfg := &Config{Steps: []Step{{Rooms: 10, RoomSize: 3, RoomsPerClient: 4}}, RoomPrefix: "p", Seed: 7, Workers: 2, Shards: 3, Shard: 1, Worker: 1}
	p := newStepPlan(cfg, 0, 100)
	// Every client belongs to exactly one of the 6 parts.
	owned := 0
	for part := range 6 {
		c := *cfg
		c.Shard, c.Worker = part/2, part%2
		owned += len(newStepPlan(&c, 0, 100).localClients())
	}
	if owned != 30 {
		t.Errorf("parts own %d clients, want 30", owned)
	}
	for _, c := range p.localClients() {
		if !p.inShard(p.id(c)) {
			t.Errorf("local client %d not in its own shard", c)
		}
		rooms := p.clientRooms(c, nil)
		if len(rooms) != 4 || int(rooms[0]) != p.primaryRoom(c) {
			t.Errorf("client %d rooms %v", c, rooms)
		}
		seen := map[int32]bool{}
		for _, r := range rooms {
			if seen[r] || r < 0 || r >= 10 {
				t.Errorf("client %d rooms %v", c, rooms)
			}
			seen[r] = true
		}
		// Another process computes the same rooms.
		again := newStepPlan(cfg, 0, 100).clientRooms(c, nil)
		for i := range rooms {
			if again[i] != rooms[i] {
				t.Fatalf("plan not deterministic: %v vs %v", rooms, again)
			}
		}
	}
	if p.inShard(99) || p.inShard(130) {
		t.Error("ids outside the step are in the shard")
	}
	for _, tt := range []struct {
		name string
		want int
	}{{"p-s1-r0", 0}, {"p-s1-r9", 9}, {"p-s1-r10", -1}, {"p-s2-r1", -1}, {"p-s1-r", -1}, {"p-s1-rx", -1}, {"p-s1-r99999999999999999999", -1}} {
		if got := p.roomIndex([]byte(tt.name)); got != tt.want {
			t.Errorf("roomIndex(%q) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestAppendRow(t *testing.T) {
	b := results.AppendEvent(nil, &results.Event{Step: "s1", Room: "p-s1-r3", Kind: results.Sent, MessageID: 7, SenderID: 2, ClientID: 5, UnixUS: 1763719201000000, LagUS: 41})
	b = results.AppendEvent(b, &results.Event{Step: "s1", Room: "p-s1-r3", Kind: results.Joined, MessageID: 7, SenderID: 2, ClientID: 5, UnixUS: 1763719200000000, LagUS: -1})
	b = results.AppendEvent(b, &results.Event{Step: "s1", Room: "p-s1-r3", Kind: results.Received, MessageID: 7, SenderID: 2, ClientID: 9, UnixUS: 1763719201000380, LagUS: -1})
	want := "s1,p-s1-r3,7,2,5,Sent,1763719201000000,41\ns1,p-s1-r3,,,5,Joined,1763719200000000,\ns1,p-s1-r3,7,2,9,Received,1763719201000380,\n"
	if string(b) != want {
		t.Errorf("rows\n%s\nwant\n%s", b, want)
	}
	for _, line := range []string{"s1,p-s1-r3,7,2,5,Sent,1763719201000000,41", "s1,p-s1-r3,,,5,Joined,1763719200000000,"} {
		if _, err := parseRow(line); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
}

func TestTruncateToLastRow(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"h\na,b\nc,d", "h\na,b\n"},
		{"h\na,b\n", "h\na,b\n"},
		{"partial", ""},
	} {
		p := filepath.Join(t.TempDir(), "x.csv")
		os.WriteFile(p, []byte(tt.in), 0o644)
		if err := TruncateToLastRow(p); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if string(got) != tt.want {
			t.Errorf("%q -> %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPaths(t *testing.T) {
	meta, parts := results.Paths("results/run.csv.gz", 2)
	if meta != "results/run.meta.json" || parts[0] != "results/run.w0.csv.gz" || parts[1] != "results/run.w1.csv.gz" {
		t.Errorf("%s %v", meta, parts)
	}
	meta, parts = results.Paths("r.csv", 1)
	if meta != "r.meta.json" || parts[0] != "r.csv" {
		t.Errorf("%s %v", meta, parts)
	}
}

func TestSendersAreSpreadEvenly(t *testing.T) {
	for _, tt := range []struct{ clients, senders, want int }{
		{4000, 400, 400}, {10, 3, 3}, {10, 0, 10}, {10, 10, 10}, {7, 1, 1},
	} {
		cfg := &Config{Steps: []Step{{Rooms: 1, NumClients: tt.clients, Senders: tt.senders, RoomsPerClient: 1}}, RoomPrefix: "p", Workers: 1, Shards: 1}
		p := newStepPlan(cfg, 0, 0)
		n, run, longest := 0, 0, 0
		for c := range tt.clients {
			if p.sends(c) {
				n++
				run = 0
			} else if run++; run > longest {
				longest = run
			}
		}
		if n != tt.want {
			t.Errorf("%d clients, senders %d: %d send, want %d", tt.clients, tt.senders, n, tt.want)
		}
		if tt.senders > 0 && longest > tt.clients/tt.senders {
			t.Errorf("%d clients, senders %d: %d receivers in a row, not spread evenly", tt.clients, tt.senders, longest)
		}
	}
}

func TestStepValidateClientsAndSenders(t *testing.T) {
	base := Step{Name: "s", Rooms: 10, RoomSize: 1, RoomsPerClient: 1, Duration: Duration(time.Second), Ramp: 1}
	for _, tt := range []struct {
		name    string
		edit    func(*Step)
		wantErr string
	}{
		{"clients override", func(s *Step) { s.NumClients = 4; s.RoomSize = 0 }, ""},
		{"negative clients", func(s *Step) { s.NumClients = -1 }, "clients must not be negative"},
		{"too many senders", func(s *Step) { s.NumClients = 4; s.Senders = 5 }, "senders must be between"},
		{"negative senders", func(s *Step) { s.Senders = -1 }, "senders must be between"},
		{"no room size", func(s *Step) { s.RoomSize = 0 }, "room size"},
	} {
		s := base
		tt.edit(&s)
		err := s.validate()
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
	s := base
	s.NumClients = 4
	if s.Clients() != 4 {
		t.Errorf("Clients() = %d with clients 4", s.Clients())
	}
}
