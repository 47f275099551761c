// The bench's machine-readable results (`scalechat bench --json FILE`):
// every row of its table with the figures `scalechat plan --from` reads.

package results

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// BenchFile is what `scalechat bench --json` writes: how and where it ran,
// and every row of its table.
type BenchFile struct {
	Version   string     `json:"version"`    // the build, e.g. "scalechat dev (commit 4d53357…, go1.26…)"
	Machine   string     `json:"machine"`    // CPU model and core count, from /proc/cpuinfo
	StartedAt time.Time  `json:"started_at"` // UTC
	LoadAvg   string     `json:"load_average_before"`
	Pinned    bool       `json:"pinned"` // server and generator on their own cores (taskset)
	Smoke     bool       `json:"smoke"`  // tiny sizes: the figures mean nothing
	Rows      []BenchRow `json:"rows"`
}

// BenchRow is one row of the bench table. A figure of 0 was not measured.
type BenchRow struct {
	Scenario    string  `json:"scenario"` // as in the table, e.g. "rooms 2500×4", "#2 oneroom n=200"
	Clients     int     `json:"clients"`
	PerSecond   float64 `json:"deliveries_per_second"`
	Ratio       float64 `json:"delivery_ratio"` // < 0: not applicable
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	ServerCPU   float64 `json:"server_cpu_seconds"`        // over the measured window
	CPUPerDel   float64 `json:"server_us_per_delivery"`    // 0: not applicable, or CPUNote
	CPUNote     string  `json:"server_cpu_note,omitempty"` // why CPUPerDel is 0 though measured: too few clock ticks (CPUTooFew)
	RSS         int64   `json:"server_rss_bytes"`
	RedisPerDel float64 `json:"redis_us_per_delivery,omitempty"` // cluster rows
	NodeRatio   float64 `json:"node_cpu_vs_one_node,omitempty"`  // cluster rows: node CPU per delivery ÷ one node alone's
	Saturated   bool    `json:"generator_saturated"`
	Figure      string  `json:"figure"` // the scenario's key figure as printed, e.g. "1.26 KiB/conn"
	Target      string  `json:"target"`
	Verdict     string  `json:"verdict"`
	Note        string  `json:"note"`
}

// WriteBenchFile writes f as indented JSON to path.
func WriteBenchFile(path string, f BenchFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the bench results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the bench results: %w", err)
	}
	return nil
}

// ReadBenchFile reads a file WriteBenchFile wrote.
func ReadBenchFile(path string) (BenchFile, error) {
	var f BenchFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("read the bench results: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s is not a file of scalechat bench --json: %w", path, err)
	}
	if len(f.Rows) == 0 {
		return f, fmt.Errorf("%s holds no rows of scalechat bench", path)
	}
	return f, nil
}
