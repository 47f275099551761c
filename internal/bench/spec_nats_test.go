//go:build linux

package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// TestStoreFigures: a cluster step's store CPU per delivery and what one
// core of it would carry (1 s ÷ it) are named after its engine, Redis or
// NATS, in the figure column and among the figures the objectives judge;
// dashes when the window's store CPU was too little to read.
func TestStoreFigures(t *testing.T) {
	for _, c := range []struct {
		name, store string
		cpu         time.Duration
		deliveries  int64
		metrics     []string
		want        string
		key         string // the figure filled, in ms; "": none
	}{
		{"NATS 4 µs a delivery", "NATS", 400 * time.Millisecond, 100_000, []string{"nats_per_delivery", "nats_core_deliveries"},
			"NATS 4.00 µs/deliv; 250.0k deliveries/s a NATS core", "nats_per_delivery"},
		{"NATS 0.5 µs a delivery", "NATS", 500 * time.Millisecond, 1_000_000, []string{"nats_per_delivery", "nats_core_deliveries"},
			"NATS 0.50 µs/deliv; 2.00M deliveries/s a NATS core", "nats_per_delivery"},
		{"NATS too little CPU to read", "NATS", time.Millisecond, 100, []string{"nats_per_delivery", "nats_core_deliveries"},
			"NATS – µs/deliv; – deliveries/s a NATS core", ""},
		{"NATS nothing delivered", "NATS", 400 * time.Millisecond, 0, []string{"nats_per_delivery", "nats_core_deliveries"},
			"NATS – µs/deliv; – deliveries/s a NATS core", ""},
		{"a NATS row has no Redis figure", "NATS", 400 * time.Millisecond, 100_000, []string{"redis_per_delivery"},
			"Redis – µs/deliv", "nats_per_delivery"},
		{"a Redis row has no NATS figure", "Redis", 400 * time.Millisecond, 100_000, []string{"nats_per_delivery", "redis_per_delivery"},
			"NATS – µs/deliv; Redis 4.00 µs/deliv", "redis_per_delivery"},
		{"no store", "", 400 * time.Millisecond, 100_000, []string{"redis_per_delivery", "nats_per_delivery"},
			"Redis – µs/deliv; NATS – µs/deliv", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fig := &clusterFig{nats: c.store == "NATS", storeCPU: c.cpu, deliveries: c.deliveries}
			row := Result{Ratio: -1, cluster: fig}
			f := specFigures(&row, results.StepMeta{}, c.store, 0)
			if got := figureColumn(c.metrics, f, row); got != c.want {
				t.Errorf("figure %q, want %q", got, c.want)
			}
			for _, k := range []string{"redis_per_delivery", "nats_per_delivery"} {
				if _, ok := f[k]; ok != (k == c.key) {
					t.Errorf("figures %v: %s there %v, want %v", f, k, ok, k == c.key)
				}
			}
			if c.key != "" && (f[c.key] != fig.storeUS/1000 || fig.storeUS <= 0) {
				t.Errorf("figure %s = %v ms, the results file's %v µs", c.key, f[c.key], fig.storeUS)
			}
		})
	}
}

// TestBenchFileEngine: a row on NATS reaches the results file as such,
// its store's cost under nats_us_per_delivery, not Redis's.
func TestBenchFileEngine(t *testing.T) {
	rows := []Result{
		{Scenario: "cluster 500×4: 2 nodes, rooms split", Ratio: -1, cluster: &clusterFig{node: 1.7, storeUS: 3.5}},
		{Scenario: "cluster 500×4: 2 nodes on NATS, rooms split", Ratio: -1, cluster: &clusterFig{nats: true, node: 2.1, storeUS: 6.25}},
	}
	f := benchFile(rows, time.Now(), "scalechat bench cluster", "", false, false)
	for i, want := range []results.BenchRow{
		{RedisPerDel: 3.5, NodeRatio: 1.7},
		{Engine: "nats", NATSPerDel: 6.25, NodeRatio: 2.1},
	} {
		got := f.Rows[i]
		if got.Engine != want.Engine || got.RedisPerDel != want.RedisPerDel || got.NATSPerDel != want.NATSPerDel || got.NodeRatio != want.NodeRatio {
			t.Errorf("row %q: engine %q, Redis %v, NATS %v, ratio %v; want %+v", got.Scenario, got.Engine, got.RedisPerDel, got.NATSPerDel, got.NodeRatio, want)
		}
	}
}

// TestSpecEngine: a setup's engine: is redis (the default) or nats, on
// which a step shows the nats_ figures, not the redis_ ones (and the
// other way round); an objective may name nats_per_delivery.
func TestSpecEngine(t *testing.T) {
	const steps = "name: t\nslo: [\"a:nats_per_delivery<=1us\"]\nsteps:\n  - {name: a, bench: {servers: c, FIG}}\n"
	for _, tt := range []struct {
		name, setup, figure, wantErr string
		clustered, nats              bool
	}{
		{"nats", "{nodes: 2, engine: nats}", "figure: [nats_per_delivery, nats_core_deliveries]", "", true, true},
		{"one node on nats", "{engine: nats}", "", "", true, true},
		{"redis said", "{nodes: 2, engine: redis}", "figure: [redis_per_delivery, redis_core_deliveries]", "", true, false},
		{"redis by default", "{nodes: 2}", "figure: [redis_per_delivery]", "", true, false},
		{"one node alone", "{}", "", "", false, false},
		{"unknown engine", "{nodes: 2, engine: kafka}", "", `setups: c: engine "kafka" (want redis or nats)`, false, false},
		{"redis on nats", "{nodes: 2, engine: nats, redis: true}", "", "a setup's nodes share one engine", false, false},
		{"scrape on nats", "{engine: nats, scrape: 1s}", "", "one server's /metrics", false, false},
		{"redis figure on nats", "{nodes: 2, engine: nats}", "figure: [redis_per_delivery]", `figure "redis_per_delivery": its servers run on NATS (engine: nats), whose figure is nats_per_delivery`, false, false},
		{"nats figure on redis", "{nodes: 2}", "figure: [nats_core_deliveries]", `figure "nats_core_deliveries": its servers do not run on NATS`, false, false},
		{"the file's redis figure on nats", "{nodes: 2, engine: nats}", "", `figure "redis_per_delivery": its servers run on NATS`, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := strings.Replace(steps, "FIG", tt.figure, 1) + "bench: {setups: {c: " + tt.setup + "}"
			if tt.name == "the file's redis figure on nats" {
				yaml += ", figure: [redis_per_delivery]"
			}
			sp, err := parseSpec("t.yaml", []byte(yaml+"}\n"))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := sp.setup("c")
			if s.clustered() != tt.clustered || (s.Engine == specEngineNATS) != tt.nats {
				t.Errorf("setup %+v: clustered %v, on NATS %v; want %v, %v", s, s.clustered(), s.Engine == specEngineNATS, tt.clustered, tt.nats)
			}
		})
	}
}

// TestStoreName: a row's note names the store its nodes share.
func TestStoreName(t *testing.T) {
	for _, c := range []struct {
		cl   clusterProcs
		want string
	}{
		{clusterProcs{}, ""},
		{clusterProcs{store: &proc{}}, "Redis"},
		{clusterProcs{nats: true, store: &proc{}}, "NATS"},
		{clusterProcs{nats: true}, ""},
	} {
		if got := c.cl.storeName(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.cl, got, c.want)
		}
	}
}
