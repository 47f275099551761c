package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KneePath returns the knee file of a search whose --out is out: "x.csv"
// gives "x.knee.json".
func KneePath(out string) string {
	meta, _ := Paths(out, 1)
	return strings.TrimSuffix(meta, ".meta.json") + ".knee.json"
}

// ProbeOut returns the --out of probe i (from 1) of a search whose --out
// is out: "x.csv" gives "x.p01.csv" (and so "x.p01.meta.json").
func ProbeOut(out string, i int) string {
	ext := ".csv"
	base := out
	if strings.HasSuffix(base, ".gz") {
		base, ext = strings.TrimSuffix(base, ".gz"), ".csv.gz"
	}
	base = strings.TrimSuffix(base, ".csv")
	return fmt.Sprintf("%s.p%02d%s", base, i, ext)
}

// Knee is <out>.knee.json, what `scalechat loadtest --find` found: the
// probes it ran, in order, and the knee.
type Knee struct {
	Dimension  string   `json:"dimension"` // rate, clients or room-size
	Unit       string   `json:"unit"`      // e.g. "msg/s per client"
	SLO        []string `json:"slo"`
	Start      float64  `json:"start"`
	Max        float64  `json:"max"`
	Resolution float64  `json:"resolution"` // e.g. 0.1 for 10 %
	Probes     []Probe  `json:"probes"`
	// Stop is why the search ended: found, generator, above-max,
	// first-failed, out-of-probes (internal/knee).
	Stop string `json:"stop"`
	// Knee is the highest load that met every objective (0: none did);
	// Above the lowest that missed one (0: none did).
	Knee  float64 `json:"knee"`
	Above float64 `json:"above"`
	// Limit is the first resource that ran out at the probe above the knee:
	// LimitKind one of generator, rate-limit, refusals, file-descriptors,
	// server-cpu, connections, latency; Limit a sentence with its figures.
	LimitKind string `json:"limit_kind"`
	Limit     string `json:"limit"`
	// Answer is the search's answer in one sentence.
	Answer string `json:"answer"`
}

// Probe is one load the search ran: a load test of one step, its files
// beside the knee file.
type Probe struct {
	Load      float64     `json:"load"`
	Step      string      `json:"step"`
	Meta      string      `json:"meta"`    // the probe's meta.json, relative to the knee file
	Verdict   string      `json:"verdict"` // met, missed or inconclusive
	SLO       []SLOResult `json:"slo"`
	Failures  []string    `json:"failures,omitempty"` // the run's own checks that failed
	P50       float64     `json:"p50_ms"`
	P99       float64     `json:"p99_ms"`
	Delivery  float64     `json:"delivery_ratio"`
	Sent      int64       `json:"sent"`
	Refused   int64       `json:"rate_limited"`
	Errors    int64       `json:"errors"`
	Saturated string      `json:"saturated,omitempty"` // why the generator saturated
	// ServerCPU is the servers' CPU in cores over the probe's sending (0
	// without --server-metrics).
	ServerCPU float64 `json:"server_cpu_cores,omitempty"`
}

// WriteKnee writes k to path as indented JSON.
func WriteKnee(path string, k *Knee) error {
	if err := writeJSON(path, k); err != nil {
		return fmt.Errorf("write knee: %w", err)
	}
	return nil
}

// writeJSON writes v to path as indented JSON with a final newline,
// creating path's folder.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadKnee reads a knee file.
func ReadKnee(path string) (*Knee, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var k Knee
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &k, nil
}
