package benchpage

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/scalechat/scalechat/internal/results"
)

func mapFile(t *testing.T, f results.BenchFile) *fstest.MapFile {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return &fstest.MapFile{Data: b}
}

// TestLoad: sections come oldest first by date (not by name), smoke runs
// are left out, and each links its file under the folder given.
func TestLoad(t *testing.T) {
	row := []results.BenchRow{{Scenario: "idle", Ratio: -1, Figure: "1.26 KiB/conn", Note: "held 15000"}}
	fsys := fstest.MapFS{
		"a-new.json":   mapFile(t, results.BenchFile{Date: "2026-11-25", Command: "scalechat bench idle", Rows: row}),
		"b-old.json":   mapFile(t, results.BenchFile{Date: "2026-11-21", Title: "Old", Rows: row}),
		"c-smoke.json": mapFile(t, results.BenchFile{Date: "2026-11-22", Smoke: true, Rows: row}),
		"notes.txt":    &fstest.MapFile{Data: []byte("not a results file")},
	}
	got, err := Load(fsys, "../benchmarks/results")
	if err != nil {
		t.Fatal(err)
	}
	var names, titles []string
	for _, s := range got {
		names, titles = append(names, s.Name), append(titles, s.Title())
	}
	if strings.Join(names, " ") != "b-old.json a-new.json" || strings.Join(titles, "|") != "Old|scalechat bench idle" {
		t.Fatalf("sections %v titled %v, want b-old.json then a-new.json, titled Old and by the command", names, titles)
	}
	if got[0].Link != "../benchmarks/results/b-old.json" || len(got[0].Notes) != 1 || got[0].Notes[0] != "idle: held 15000" {
		t.Errorf("section %+v", got[0])
	}
	if _, err := Load(fstest.MapFS{"c-smoke.json": fsys["c-smoke.json"]}, "x"); err == nil {
		t.Error("a folder of smoke runs alone gave a page")
	}
}

// TestTable: a table keeps the columns some row fills, shows an
// unmeasured figure as "-", and escapes a pipe in a cell.
func TestTable(t *testing.T) {
	got := table([]results.BenchRow{
		{Scenario: "rooms 2500×4", Clients: 10000, PerSecond: 40000, Ratio: 1, P50: 0.15, P99: 1.21, CPUPerDel: 16.75, Saturated: true},
		{Scenario: "a|b", Ratio: -1, Figure: "1.26 KiB/conn"},
	})
	want := `| scenario | clients | deliveries/s | delivered | p50 | p99 | µs/delivery | generator saturated | figure |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |
| rooms 2500×4 | 10000 | 40.0 k | 100 % | 0.15 ms | 1.21 ms | 16.75 | YES | - |
| a\|b | - | - | - | - | - | - | - | 1.26 KiB/conn |
`
	if got != want {
		t.Errorf("table\n%s\nwant\n%s", got, want)
	}
	// The cluster's rows: Redis's and NATS's store CPU, each in its column.
	got = table([]results.BenchRow{
		{Scenario: "cluster 500×4: 2 nodes, rooms split", Ratio: -1, NodeRatio: 1.7, RedisPerDel: 3.5},
		{Scenario: "cluster 500×4: 2 nodes on NATS, rooms split", Ratio: -1, NodeRatio: 2.5, NATSPerDel: 6.5, Engine: "nats"},
	})
	want = `| scenario | node CPU vs 1 node | Redis µs/delivery | NATS µs/delivery |
| --- | ---: | ---: | ---: |
| cluster 500×4: 2 nodes, rooms split | ×1.70 | 3.50 | - |
| cluster 500×4: 2 nodes on NATS, rooms split | ×2.50 | - | 6.50 |
`
	if got != want {
		t.Errorf("table\n%s\nwant\n%s", got, want)
	}
}

// TestRender: the page names each file's machine, day, build and
// command, and holds its table.
func TestRender(t *testing.T) {
	f := results.BenchFile{Version: "scalechat v1 (commit abc1234)", Date: "2026-11-26", Command: "scalechat bench --json x.json rooms",
		Pinned: true, ServerCPUs: "0-7", GeneratorCPUs: "8-15",
		Host: results.Host{Model: "Test CPU", Cores: 16, MemoryBytes: 64 << 30, Kernel: "6.1.0", OS: "Debian 12", NofileSoft: 1048576},
		Rows: []results.BenchRow{{Scenario: "rooms 2500×4", CPUPerDel: 3.5, Ratio: -1}}}
	page, err := Render([]Section{{Name: "x.json", Link: "r/x.json", File: f, Table: table(f.Rows)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## scalechat bench --json x.json rooms",
		"Measured 2026-11-26 on Test CPU, 16 cores, 64 GiB memory, kernel 6.1.0, Debian 12, open files 1048576; build: scalechat v1 (commit abc1234);\nserver on CPU 0-7, generator on CPU 8-15.",
		"Figures: [r/x.json](r/x.json).",
		"```\nscalechat bench --json x.json rooms\n```",
		"| rooms 2500×4 | 3.50 |",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}

// TestPageRows: a file's page_rows pick the rows its section shows (every
// row whose scenario contains one), and the section says how many of the
// file's it shows; without them every row is shown.
func TestPageRows(t *testing.T) {
	rows := []results.BenchRow{{Scenario: "scaling 1 loop, 1M"}, {Scenario: "scaling 1 loop: knee"}, {Scenario: "scaling 2 loops: knee"}}
	for _, tt := range []struct {
		name  string
		pick  []string
		shown []string
	}{
		{"all", nil, []string{"scaling 1 loop, 1M", "scaling 1 loop: knee", "scaling 2 loops: knee"}},
		{"knees", []string{"knee"}, []string{"scaling 1 loop: knee", "scaling 2 loops: knee"}},
		{"none match", []string{"8 loops"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"s.json": mapFile(t, results.BenchFile{Date: "2026-11-27", PageRows: tt.pick, Rows: rows})}
			secs, err := Load(fsys, "results")
			if err != nil {
				t.Fatal(err)
			}
			s := secs[0]
			if s.Shown != len(tt.shown) || s.Total != len(rows) {
				t.Errorf("shown %d of %d, want %d of %d", s.Shown, s.Total, len(tt.shown), len(rows))
			}
			for _, r := range rows {
				if want := slices.Contains(tt.shown, r.Scenario); strings.Contains(s.Table, "| "+r.Scenario+" |") != want {
					t.Errorf("row %q on the page: %v, want %v", r.Scenario, !want, want)
				}
			}
		})
	}
}
