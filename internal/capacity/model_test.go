package capacity

import (
	"math"
	"strings"
	"testing"
)

// testCosts are round unit costs, so that the cases below can be worked
// out by hand (WakeUp 0: CPU is linear in messages).
var testCosts = Costs{PerMessage: 20, PerDelivery: 5, PerBatched: 5, SplitNode: 100, SplitRedis: 80, OwnedNode: 30, OwnedRedis: 40,
	ConnectUS: 300, IdleBytes: 1024}

func TestMake(t *testing.T) {
	big := Node{Cores: 1, Memory: 16 << 30, Files: 1e6, Headroom: 0.5}
	for _, tc := range []struct {
		name  string
		w     Workload
		n     Node
		check func(t *testing.T, p Plan)
	}{
		{"one node", Workload{Users: 1000, RoomsPerUser: 1, RoomSize: 10, Rate: 1, MsgSize: 100, Spanning: -1}, big,
			func(t *testing.T, p Plan) {
				// 1,000 messages/s × (20 + 10 × 5) µs = 0.07 cores.
				want(t, "nodes", float64(p.Nodes), 1)
				want(t, "rooms", p.Rooms, 100)
				want(t, "deliveries", p.Deliveries, 10000)
				want(t, "CPU", p.CPUPerNode, 0.07)
				want(t, "Redis shards", float64(p.RedisShards), 0)
				// In: 100 B + 2 B header + 4 B mask; out: 100 + 60 = 160 B + 4 B header.
				want(t, "in", p.InPerNode, 1000*106)
				want(t, "out", p.OutPerNode, 10000*164)
				want(t, "memory", p.MemPerNode, 20<<20+1000*1024)
				want(t, "files", p.FilesPerNode, 2000)
				// 1,000 × 300 µs over 0.93 spare cores.
				want(t, "reconnect", p.ReconnectSeconds, 0.3/0.93)
				if p.Limit != "one node carries it" {
					t.Errorf("limit %q", p.Limit)
				}
			}},
		{"CPU, rooms spanning nodes", Workload{Users: 100000, RoomsPerUser: 2, RoomSize: 10, Rate: 1, MsgSize: 100, Spanning: -1},
			Node{Cores: 1, Memory: 16 << 30, Files: 1e6, Headroom: 0.6},
			func(t *testing.T, p Plan) {
				// 100,000 msg/s × (70 µs + 100 µs of cluster) = 17 cores; 17 ÷ N ≤ 0.4 → N = 43.
				want(t, "nodes", float64(p.Nodes), 43)
				want(t, "spanning", p.Spanning, 1)
				want(t, "CPU per node", p.CPUPerNode, 17.0/43)
				want(t, "cluster per node", p.ClusterPerNode, 10.0/43)
				// Redis: 100,000 × 80 µs = 8 cores ÷ 0.4 per shard = 20 shards.
				want(t, "Redis CPU", p.RedisCPU, 8)
				want(t, "Redis shards", float64(p.RedisShards), 20)
				if p.Limit != "CPU" {
					t.Errorf("limit %q", p.Limit)
				}
			}},
		{"CPU, rooms on one node", Workload{Users: 100000, RoomsPerUser: 1, RoomSize: 10, Rate: 1, MsgSize: 100, Spanning: -1},
			Node{Cores: 1, Memory: 16 << 30, Files: 1e6, Headroom: 0.6},
			func(t *testing.T, p Plan) {
				// 100,000 × (70 + 30) µs = 10 cores ÷ 0.4 = 25 nodes; Redis 4 cores = 10 shards.
				want(t, "nodes", float64(p.Nodes), 25)
				want(t, "spanning", p.Spanning, 0)
				want(t, "Redis shards", float64(p.RedisShards), 10)
			}},
		{"memory: history", Workload{Users: 10000, RoomsPerUser: 1, RoomSize: 10, Rate: 1.0 / 60, MsgSize: 100, History: 100, Spanning: -1},
			Node{Cores: 1, Memory: 64 << 20, Files: 1e6, Headroom: 0.5},
			func(t *testing.T, p Plan) {
				// 1,000 rooms × 100 × (164 + 64) B × 2 = 45.6 MB of history; with 20 MiB + 10,000 KiB
				// it overflows 80 % of 64 MiB (53.7 MB) on one node, and fits on two.
				want(t, "nodes", float64(p.Nodes), 2)
				want(t, "history per node", p.HistoryPerNode, 45.6e6/2)
				want(t, "memory per node", p.MemPerNode, 20<<20+5000*1024+22.8e6)
				if p.Limit != "memory" || p.NodesByCPU != 1 {
					t.Errorf("limit %q, by CPU %d", p.Limit, p.NodesByCPU)
				}
			}},
		{"open files", Workload{Users: 50000, RoomsPerUser: 1, RoomSize: 2, Rate: 1.0 / 60, MsgSize: 100, Spanning: -1},
			Node{Cores: 1, Memory: 16 << 30, Files: 20000, Headroom: 0.5},
			func(t *testing.T, p Plan) {
				// 50,000 ÷ N + 1,000 ≤ 20,000 → N = 3.
				want(t, "nodes", float64(p.Nodes), 3)
				if p.Limit != "open files" {
					t.Errorf("limit %q", p.Limit)
				}
			}},
		{"spanning given", Workload{Users: 1000, RoomsPerUser: 3, RoomSize: 4, Rate: 1, MsgSize: 100, Spanning: 0.25}, big,
			func(t *testing.T, p Plan) {
				want(t, "nodes", float64(p.Nodes), 1)
				want(t, "spanning on one node", p.Spanning, 0)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Make(tc.w, tc.n, testCosts)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p)
		})
	}
}

func want(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s: %g, want %g", what, got, want)
	}
}

// TestRoomsLoaded: a spanning room of s members placed at random over N
// nodes is loaded on N·(1 − (1 − 1/N)^s) of them.
func TestRoomsLoaded(t *testing.T) {
	w := Workload{Users: 400000, RoomsPerUser: 2, RoomSize: 2, Rate: 1, MsgSize: 100, Spanning: 1}
	p := Plan{Workload: w, Node: Node{Cores: 1, Memory: 1 << 30, Files: 1e6, Headroom: 0.5}, Costs: testCosts,
		Rooms: 400000, Messages: 400000, Deliveries: 800000}
	p.at(2)
	// 2 nodes, rooms of 2: 2 × (1 − 1/4) = 1.5 nodes a room; 400,000 × 1.5 ÷ 2.
	want(t, "rooms per node", p.RoomsPerNode, 300000)
}

func TestMakeRefuses(t *testing.T) {
	n := Node{Cores: 1, Memory: 1 << 30, Files: 1e6, Headroom: 0.5}
	w := Workload{Users: 100, RoomsPerUser: 1, RoomSize: 10, Rate: 1, MsgSize: 100, Spanning: -1}
	for _, tc := range []struct {
		name string
		w    func(*Workload)
		n    func(*Node)
		want string
	}{
		{"room bigger than users", func(w *Workload) { w.RoomSize = 200 }, nil, "rooms of 200 members need at least that many users, not 100"},
		{"no message", func(w *Workload) { w.MsgSize = 1 }, nil, "message size must be at least 2 bytes"},
		{"tiny node", nil, func(n *Node) { n.Memory = 1 << 20 }, "memory per node must be at least 64MiB"},
		{"no files", nil, func(n *Node) { n.Files = 500 }, "open-file limit must be more than 1000"},
		{"too big", func(w *Workload) { w.Users, w.Rate = 1e9, 20 }, nil, "needs more than 100000 nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, n := w, n
			if tc.w != nil {
				tc.w(&w)
			}
			if tc.n != nil {
				tc.n(&n)
			}
			_, err := Make(w, n, testCosts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	w := Workload{Users: 1000, RoomsPerUser: 150, RoomSize: 10, Rate: 30, MsgSize: 100, Spanning: -1}
	p, err := Make(w, Node{Cores: 64, Memory: 64 << 30, Files: 1e6, Headroom: 0.5}, testCosts)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(p.Warnings, "\n")
	for _, s := range []string{"--max-rooms-per-connection (100)", "--rate-limit (20/s)"} {
		if !strings.Contains(got, s) {
			t.Errorf("warnings %q lack %q", got, s)
		}
	}
}
