package capacity

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// TestDeriveNATS: the NATS figures are optional; with them the costs
// have nats-server's µs per message (× 4, rooms of 4), the rooms on A
// bounded by the split ones when unmeasured; without the split ones,
// they are refused.
func TestDeriveNATS(t *testing.T) {
	split := Figure{Key: KeySplitNATS, Value: 6.5, Unit: "µs/delivery", Source: "test"}
	owned := Figure{Key: KeyOwnedNATS, Value: 1.25, Unit: "µs/delivery", Source: "test"}
	for _, tc := range []struct {
		name                string
		more                []Figure
		nats                bool
		splitUS, ownedUS    float64
		wantErr, wantSource string
	}{
		{"none", nil, false, 0, 0, "", ""},
		{"both", []Figure{split, owned}, true, 26, 5, "", "test"},
		{"split alone", []Figure{split}, true, 26, 26, "", "split_nats_us taken, an upper bound"},
		{"rooms on A alone", []Figure{owned}, false, 0, 0, "the figure split_nats_us is missing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Derive(append(testFigures(), tc.more...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.NATS != tc.nats || math.Abs(c.SplitNATS-tc.splitUS) > 1e-9 || math.Abs(c.OwnedNATS-tc.ownedUS) > 1e-9 {
				t.Errorf("NATS %v, %g and %g µs a message; want %v, %g and %g", c.NATS, c.SplitNATS, c.OwnedNATS, tc.nats, tc.splitUS, tc.ownedUS)
			}
			// The Redis costs are the same with NATS's or without.
			want(t, "split, Redis", c.SplitRedis, 89.6)
			source := ""
			for _, f := range c.Figures {
				if f.Key == KeyOwnedNATS {
					source = f.Source
				}
			}
			if !strings.Contains(source, tc.wantSource) || (tc.wantSource == "") != (source == "") {
				t.Errorf("owned_nats_us from %q, want %q", source, tc.wantSource)
			}
		})
	}
}

// TestMakeNATS: on NATS, nats-server's cores are the messages' cost at
// the headroom, besides the Redis shards; none on one node or without
// the NATS figures.
func TestMakeNATS(t *testing.T) {
	onNATS := testCosts
	onNATS.NATS, onNATS.SplitNATS, onNATS.OwnedNATS = true, 24, 4
	n := Node{Cores: 1, Memory: 16 << 30, Files: 1e6, Headroom: 0.6}
	for _, tc := range []struct {
		name      string
		w         Workload
		c         Costs
		cpu       float64
		cores     int
		redisCPUs float64
	}{
		// 100,000 msg/s × 24 µs = 2.4 cores ÷ 0.4 = 6 cores; Redis 8.
		{"spanning", Workload{Users: 100000, RoomsPerUser: 2, RoomSize: 10, Rate: 1, MsgSize: 100, Spanning: -1}, onNATS, 2.4, 6, 8},
		// 100,000 × 4 µs = 0.4 cores ÷ 0.4 = 1 core; Redis 4.
		{"rooms on one node", Workload{Users: 100000, RoomsPerUser: 1, RoomSize: 10, Rate: 1, MsgSize: 100, Spanning: -1}, onNATS, 0.4, 1, 4},
		{"without NATS figures", Workload{Users: 100000, RoomsPerUser: 2, RoomSize: 10, Rate: 1, MsgSize: 100, Spanning: -1}, testCosts, 0, 0, 8},
		{"one node", Workload{Users: 1000, RoomsPerUser: 1, RoomSize: 10, Rate: 1, MsgSize: 100, Spanning: -1}, onNATS, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Make(tc.w, n, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			want(t, "NATS CPU", p.NATSCPU, tc.cpu)
			want(t, "NATS cores", float64(p.NATSCores), float64(tc.cores))
			want(t, "Redis CPU", p.RedisCPU, tc.redisCPUs)
		})
	}
}

// TestFromBenchNATS: a results file's rows on NATS give the NATS figures
// and only those: a row on NATS never counts for Redis's, whatever its
// name.
func TestFromBenchNATS(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rows ...results.BenchRow) string {
		path := filepath.Join(dir, name)
		busy := results.BenchRow{Scenario: "rooms 2500×4", PerSecond: 40000, CPUPerDel: 16}
		if err := results.WriteBenchFile(path, results.BenchFile{Version: "test", Machine: "test", Rows: append(rows, busy)}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	redisSplit := results.BenchRow{Scenario: "cluster 500×4: 2 nodes, rooms split", RedisPerDel: 3.5, NodeRatio: 1.7}
	natsSplit := results.BenchRow{Scenario: "cluster 500×4: 2 nodes on NATS, rooms split", Engine: "nats", NATSPerDel: 6.5, NodeRatio: 2.5}
	natsOnA := results.BenchRow{Scenario: "#1 cluster 500×4: 2 nodes on NATS, rooms on A", Engine: "nats", NATSPerDel: 1.5, NodeRatio: 1.2}
	// A row on NATS named as Redis's would be: the engine decides.
	natsNamedAsRedis := results.BenchRow{Scenario: "cluster 500×4: 2 nodes, rooms split", Engine: "nats", NATSPerDel: 9, NodeRatio: 9}
	for _, tc := range []struct {
		name string
		file string
		want map[string]float64 // figures from the file; 0: not in it
	}{
		{"Redis and NATS", write("both.json", redisSplit, natsSplit, natsOnA),
			map[string]float64{KeySplitRedis: 3.5, KeySplitRatio: 1.7, KeySplitNATS: 6.5, KeyOwnedNATS: 1.5}},
		{"Redis alone", write("redis.json", redisSplit),
			map[string]float64{KeySplitRedis: 3.5, KeySplitRatio: 1.7, KeySplitNATS: 0, KeyOwnedNATS: 0}},
		{"NATS alone", write("nats.json", natsSplit, natsNamedAsRedis),
			map[string]float64{KeySplitRedis: 0, KeySplitRatio: 0, KeySplitNATS: 6.5, KeyOwnedNATS: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			figs, err := FromBench(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Figure{}
			for _, f := range figs {
				got[f.Key] = f
			}
			for key, v := range tc.want {
				f, ok := got[key]
				fromFile := ok && strings.HasPrefix(f.Source, tc.file+" (")
				switch {
				case v > 0 && (!fromFile || f.Value != v):
					t.Errorf("%s = %+v, want %g from %s", key, f, v, tc.file)
				case v == 0 && fromFile:
					t.Errorf("%s = %+v, want none from %s", key, f, tc.file)
				}
			}
			if _, err := Derive(figs); err != nil {
				t.Errorf("the figures do not fit the model: %v", err)
			}
		})
	}
}
