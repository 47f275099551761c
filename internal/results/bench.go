// The bench's machine-readable results (`scalechat bench --json FILE`):
// every row of its table with the figures `scalechat plan --from` reads.

package results

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// BenchFile is what `scalechat bench --json` writes: how and where it ran,
// and every row of its table.
type BenchFile struct {
	Version   string    `json:"version"`    // the build, e.g. "scalechat dev (commit 4d53357…, go1.26…)"
	Machine   string    `json:"machine"`    // CPU model and core count, from /proc/cpuinfo
	Host      Host      `json:"host"`       // the machine in detail; a zero field was not recorded
	StartedAt time.Time `json:"started_at"` // UTC; zero in a file converted from a log that gave the day only
	// Date is the day it was measured (YYYY-MM-DD): StartedAt's, or the
	// day a converted log gave.
	Date    string `json:"date"`
	Command string `json:"command"` // how to measure it again, e.g. "scalechat bench --json FILE cluster"
	LoadAvg string `json:"load_average_before"`
	Pinned  bool   `json:"pinned"` // server and generator on their own cores (taskset)
	// ServerCPUs and GeneratorCPUs are the CPU lists they were pinned to
	// ("0", "0-7"); empty in files older than them (CPU 0 and CPU 1).
	ServerCPUs    string `json:"server_cpus,omitempty"`
	GeneratorCPUs string `json:"generator_cpus,omitempty"`
	Smoke         bool   `json:"smoke"` // tiny sizes: the figures mean nothing
	// Title names the results where a page shows them; Source says where
	// figures converted from an older record were read (empty for a run's
	// own file); About is what a reader should know besides the rows.
	Title  string `json:"title,omitempty"`
	Source string `json:"source,omitempty"`
	About  string `json:"about,omitempty"`
	// PageRows, when set, are the rows a page shows: those whose scenario
	// contains one of them (a sweep's knees and a few steps); the file
	// keeps every row.
	PageRows []string   `json:"page_rows,omitempty"`
	Rows     []BenchRow `json:"rows"`
}

// Host is the machine a benchmark ran on: the figures hold for it.
type Host struct {
	Model       string `json:"cpu_model"` // from /proc/cpuinfo
	Cores       int    `json:"cores"`     // CPUs the process could use
	MemoryBytes uint64 `json:"memory_bytes"`
	Kernel      string `json:"kernel"`      // /proc/sys/kernel/osrelease
	OS          string `json:"os"`          // /etc/os-release's PRETTY_NAME
	NofileSoft  uint64 `json:"nofile_soft"` // open files a process may have (ulimit -n)
}

// String is the host in one line, naming what was not recorded.
func (h Host) String() string {
	unknown := func(s string) string {
		if s == "" {
			return "?"
		}
		return s
	}
	mem, files := "?", "?"
	if h.MemoryBytes > 0 {
		mem = fmt.Sprintf("%.0f GiB", float64(h.MemoryBytes)/(1<<30))
	}
	if h.NofileSoft > 0 {
		files = fmt.Sprint(h.NofileSoft)
	}
	return fmt.Sprintf("%s, %d cores, %s memory, kernel %s, %s, open files %s", unknown(h.Model), h.Cores, mem, unknown(h.Kernel), unknown(h.OS), files)
}

// BenchRow is one row of the bench table. A figure of 0 was not measured.
type BenchRow struct {
	Scenario    string  `json:"scenario"` // as in the table, e.g. "rooms 2500×4", "#2 oneroom n=200"
	Clients     int     `json:"clients"`
	PerSecond   float64 `json:"deliveries_per_second"`
	Ratio       float64 `json:"delivery_ratio"` // < 0: not applicable
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms,omitempty"`
	ServerCPU   float64 `json:"server_cpu_seconds"`        // over the measured window
	CPUPerDel   float64 `json:"server_us_per_delivery"`    // 0: not applicable, or CPUNote
	CPUNote     string  `json:"server_cpu_note,omitempty"` // why CPUPerDel is 0 though measured: too few clock ticks (CPUTooFew)
	RSS         int64   `json:"server_rss_bytes"`
	RedisPerDel float64 `json:"redis_us_per_delivery,omitempty"` // cluster rows on Redis
	NATSPerDel  float64 `json:"nats_us_per_delivery,omitempty"`  // cluster rows on NATS: nats-server's µs per delivery
	Engine      string  `json:"engine,omitempty"`                // cluster rows: "nats" on NATS; none on Redis (or without a cluster)
	NodeRatio   float64 `json:"node_cpu_vs_one_node,omitempty"`  // cluster rows: node CPU per delivery ÷ one node alone's
	GenCPU      float64 `json:"generator_cpu_seconds,omitempty"` // over the measured window
	Saturated   bool    `json:"generator_saturated"`
	Loops       int     `json:"server_loops,omitempty"` // the scaling scenario's steps: the server's event loops
	Figure      string  `json:"figure"`                 // the scenario's key figure as printed, e.g. "1.26 KiB/conn"
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
	b, err := os.ReadFile(path)
	if err != nil {
		return BenchFile{}, fmt.Errorf("read the bench results: %w", err)
	}
	return ParseBenchFile(path, b)
}

// ReadBenchFS reads the results file name of fsys (the committed results
// a binary embeds, or a folder).
func ReadBenchFS(fsys fs.FS, name string) (BenchFile, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return BenchFile{}, fmt.Errorf("read the bench results: %w", err)
	}
	return ParseBenchFile(name, b)
}

// ParseBenchFile decodes the content b of the results file name. A file
// written before the date was recorded takes it from StartedAt.
func ParseBenchFile(name string, b []byte) (BenchFile, error) {
	var f BenchFile
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s is not a file of scalechat bench --json: %w", name, err)
	}
	if len(f.Rows) == 0 {
		return f, fmt.Errorf("%s holds no rows of scalechat bench", name)
	}
	if f.Date == "" && !f.StartedAt.IsZero() {
		f.Date = f.StartedAt.UTC().Format(time.DateOnly)
	}
	return f, nil
}
