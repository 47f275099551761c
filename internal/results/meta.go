package results

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Meta is the content of a run's <out>.meta.json: how the load test ran and
// each step's plan and outcome.
type Meta struct {
	Tool          string     `json:"tool"`
	Version       string     `json:"version"`
	StartedAt     time.Time  `json:"started_at"`
	EndedAt       time.Time  `json:"ended_at"`
	Args          []string   `json:"args"`
	Machine       Machine    `json:"machine"`
	Parts         []string   `json:"parts"`
	ServerMetrics string     `json:"server_metrics,omitempty"`
	Steps         []StepMeta `json:"steps"`
	// Additions to the documented format (readers ignore unknown fields).
	Scenario   string `json:"scenario,omitempty"`
	URL        string `json:"url"`
	Protocol   string `json:"protocol"`
	RoomPrefix string `json:"room_prefix"`
	Seed       uint64 `json:"seed"`
	Workers    int    `json:"workers"`
	Shard      string `json:"shard"`
	// Transport is ws or poll; PollInterval (plain polling) and PollWait
	// (long polling) say how a poll run polled.
	Transport    string   `json:"transport"`
	Compression  bool     `json:"compression,omitempty"` // the clients offered permessage-deflate
	PollInterval Duration `json:"poll_interval,omitempty"`
	PollWait     Duration `json:"poll_wait,omitempty"`
	// SLO holds the objectives of --slo judged on each step, when given.
	SLO []SLOResult `json:"slo,omitempty"`
}

// Machine describes the host of a run.
type Machine struct {
	Hostname       string `json:"hostname"`
	OS             string `json:"os"`
	Arch           string `json:"arch"`
	Cores          int    `json:"cores"`
	GOMAXPROCS     int    `json:"gomaxprocs"`
	MemoryBytes    uint64 `json:"memory_bytes"`
	NofileSoft     uint64 `json:"nofile_soft"`
	NofileHard     uint64 `json:"nofile_hard"`
	EphemeralPorts string `json:"ephemeral_ports"`
}

// Percentiles of a latency distribution in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`

	// P999 is the 99.9th percentile (absent from meta.json files older than it).
	P999 float64 `json:"p99_9,omitempty"`
}

// StepMeta is one step's plan and outcome.
type StepMeta struct {
	Name             string    `json:"name"`
	Rooms            int       `json:"rooms"`
	RoomSize         int       `json:"room_size"`
	RoomsPerClient   int       `json:"rooms_per_client"`
	Clients          int       `json:"clients"`
	MsgFrequency     Duration  `json:"msg_frequency"`
	MsgSize          int       `json:"msg_size"`
	Duration         Duration  `json:"duration"`
	Ramp             float64   `json:"ramp"`
	StartedAt        time.Time `json:"started_at"`
	EndedAt          time.Time `json:"ended_at"`
	Sent             int64     `json:"sent"`
	Expected         int64     `json:"expected"`
	Received         int64     `json:"received"`
	ConnectErrors    int64     `json:"connect_errors"`
	Saturated        bool      `json:"saturated"`
	SaturationReason string    `json:"saturation_reason"`
	// Additions to the documented format.
	RoomSkew      float64 `json:"room_skew"`
	LocalClients  int64   `json:"local_clients"` // clients this shard ran
	Joined        int64   `json:"joined"`
	Lost          int64   `json:"lost"`
	DeliveryRatio float64 `json:"delivery_ratio"`
	ReceivedAll   int64   `json:"received_all"` // including messages of other shards
	Disconnects   int64   `json:"disconnects"`
	ServerErrors  int64   `json:"server_errors"`
	Replayed      int64   `json:"replayed"`
	OutOfOrder    int64   `json:"out_of_order"`
	Invalid       int64   `json:"invalid"`
	// Unexpected counts chat messages from senders or rooms the run did not
	// create (another client in the room, a server that broadcasts to all).
	Unexpected    int64       `json:"unexpected"`
	SendErrors    int64       `json:"send_errors,omitempty"`  // HTTP transport: failed POSTs
	PollErrors    int64       `json:"poll_errors,omitempty"`  // HTTP transport: failed polls
	HistoryGaps   int64       `json:"history_gaps,omitempty"` // HTTP transport: answers with a history_gap
	LatencyMs     Percentiles `json:"latency_ms"`
	SendLagMs     Percentiles `json:"send_lag_ms"`
	ConnectMs     Percentiles `json:"connect_ms"` // from a connect's due instant to the client's last joined frame
	Senders       int         `json:"senders,omitempty"`
	SendStartedAt time.Time   `json:"send_started_at"` // first due send (or the start of holding)
	SendEndedAt   time.Time   `json:"send_ended_at"`   // end of the drain (or of holding)
	Interrupted   bool        `json:"interrupted"`
	FirstError    string      `json:"first_error,omitempty"` // why a client first failed to connect or join, or was dropped (HTTP: a request failed)
	Incomplete    string      `json:"incomplete,omitempty"`  // a worker's part is missing

	// RateLimited counts the server's refusals for its rate limit: error
	// frames with code rate_limited, or POSTs answered 429.
	RateLimited int64 `json:"rate_limited"`
	// Unavailable counts the messages the server gave up: error frames
	// with code unavailable (a cluster that could not take them).
	Unavailable int64 `json:"unavailable"`

	// NetworkFull names a link of the generator's machine that ran at 90 %
	// of its speed or more in a second of the step's sending or drain
	// ("eth0 received 941 Mb/s of its 1000 Mb/s link"); "" when none did or
	// no link reports a speed.
	NetworkFull string `json:"network_full,omitempty"`

	// FirstServerError is the first error frame the server sent: a refusal
	// of one message, which leaves its connection open, so it is kept
	// apart from FirstError (absent from meta.json files older than it).
	FirstServerError string `json:"first_server_error,omitempty"`
}

// ReadMeta reads a meta.json file.
func ReadMeta(path string) (*Meta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// Paths derives the files of a run from --out: "x.csv" (or "x.csv.gz", or
// "x") gives the meta file "x.meta.json" and, with workers > 1, the worker
// parts "x.w0.csv" ….
func Paths(out string, workers int) (meta string, parts []string) {
	ext := ".csv"
	base := out
	if strings.HasSuffix(base, ".gz") {
		base = strings.TrimSuffix(base, ".gz")
		ext += ".gz"
	}
	base = strings.TrimSuffix(base, ".csv")
	if workers <= 1 {
		return base + ".meta.json", []string{out}
	}
	for i := range workers {
		parts = append(parts, fmt.Sprintf("%s.w%d%s", base, i, ext))
	}
	return base + ".meta.json", parts
}

// ServerMetricsPath returns the server CSV of a run whose --out is out:
// "x.csv" (or "x.csv.gz", or "x") gives "x.server.csv".
func ServerMetricsPath(out string) string {
	meta, _ := Paths(out, 1)
	return strings.TrimSuffix(meta, ".meta.json") + ".server.csv"
}

// Duration is a time.Duration written as "1.5s" in YAML and JSON.
type Duration time.Duration

// MarshalText writes d as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration string such as "250ms" or "1m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. 500ms, 1s, 2m)", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML accepts "1s" and also a bare 0.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "0" {
		*d = 0
		return nil
	}
	return d.UnmarshalText([]byte(n.Value))
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
