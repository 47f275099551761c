//go:build linux

package bench

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// TestBenchFile: the rows of the table reach the JSON file with their
// cluster figures, and read back as written.
func TestBenchFile(t *testing.T) {
	rows := []Result{
		{Scenario: "rooms 2500×4", Clients: 10000, PerSecond: 40000, Ratio: 1, CPUPerDel: 16.75, ServerCPU: 10.05},
		{Scenario: "cluster 500×4: 2 nodes, rooms split", PerSecond: 8000, Ratio: -1, CPUPerDel: 60,
			cluster: &clusterFig{node: 2.22, storeUS: 22.4}},
		{Scenario: "idle", Ratio: -1, Figure: "1.26 KiB/conn"},
	}
	f := benchFile(rows, time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC), "scalechat bench rooms", "0.1 0.2 0.3", true, false)
	path := filepath.Join(t.TempDir(), "b.json")
	if err := results.WriteBenchFile(path, f); err != nil {
		t.Fatal(err)
	}
	got, err := results.ReadBenchFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 3 || got.Machine == "" || !got.Pinned || got.LoadAvg != "0.1 0.2 0.3" {
		t.Fatalf("read back %+v", got)
	}
	// The machine is part of every result: the figures hold for it.
	if h := got.Host; h.Model == "" || h.Cores < 1 || h.Kernel == "" || h.MemoryBytes == 0 || h.NofileSoft == 0 {
		t.Errorf("host %+v: a field is missing", h)
	}
	if got.Date != "2026-11-24" || got.Command != "scalechat bench rooms" {
		t.Errorf("date %q, command %q", got.Date, got.Command)
	}
	if r := got.Rows[1]; r.NodeRatio != 2.22 || r.RedisPerDel != 22.4 || r.CPUPerDel != 60 {
		t.Errorf("cluster row %+v", r)
	}
	if r := got.Rows[0]; r.CPUPerDel != 16.75 || r.PerSecond != 40000 || r.Clients != 10000 {
		t.Errorf("rooms row %+v", r)
	}
	if got.Rows[2].Figure != "1.26 KiB/conn" {
		t.Errorf("idle row %+v", got.Rows[2])
	}
}
