// The targets comparison (`scalechat bench compare`) runs the same steps
// against several servers, one after another. Its results folder holds
// targets.json (how it ran, and every row) and targets.csv (the rows);
// `scalechat report` draws them side by side.

package results

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// File names of a targets comparison.
const (
	TargetsCSV  = "targets.csv"
	TargetsJSON = "targets.json"
)

// TargetRow is one step against one target.
type TargetRow struct {
	Target     string  `json:"target"`
	Protocol   string  `json:"protocol"`
	Step       string  `json:"step"`
	Clients    int64   `json:"clients"`
	Joined     int64   `json:"joined"`
	Sent       int64   `json:"sent"`
	Expected   int64   `json:"expected"`
	Received   int64   `json:"received"`
	Unexpected int64   `json:"unexpected"`
	Errors     int64   `json:"errors"` // connect errors and dropped connections
	Ratio      float64 `json:"delivery_ratio"`
	PerSecond  float64 `json:"deliveries_per_second"`
	P50        float64 `json:"p50_ms"`
	P90        float64 `json:"p90_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	// Server figures over the step's sending window, from /proc (0 when
	// the target's process is not known).
	CPUPerDelivery float64 `json:"server_cpu_us_per_delivery"`
	RSS            int64   `json:"server_rss_bytes"`
	RSSPerConn     float64 `json:"server_rss_bytes_per_connection"` // growth over the idle server, per joined client
	GeneratorCPU   float64 `json:"generator_cpu_share"`             // of one core, over the window
	Saturated      bool    `json:"saturated"`
	Note           string  `json:"note,omitempty"` // why the row is not to be trusted; a failed row's begins with FAILED

	// CPUPerConnect is the server's CPU µs from the step's start to its
	// first send (or its holding), over the clients that joined: what
	// accepting, upgrading and joining a connection costs (0 when the
	// process is not known or nobody joined).
	CPUPerConnect float64 `json:"server_cpu_us_per_connect"`

	// CPUNote says why CPUPerDelivery or CPUPerConnect is 0 though the
	// server was sampled: the CPU time it is made of held fewer clock ticks
	// than read it to 10 % (CPUTooFew, one reason per figure, "; " between).
	// Every table, page and ratio shows such a figure as "–" with this.
	CPUNote string `json:"server_cpu_note,omitempty"`
	// Which of the two is withheld so.
	CPUDeliveryTooFew bool `json:"server_cpu_us_per_delivery_too_few_ticks,omitempty"`
	CPUConnectTooFew  bool `json:"server_cpu_us_per_connect_too_few_ticks,omitempty"`
}

// Failure says, in a few words, why a row measured nothing: its target's
// run failed (a row with no step), it connected no client, or it delivered
// no message. It is "" for a row that measured something. A step that
// sent nothing delivers nothing and is not a failure (it only holds
// connections).
func (r TargetRow) Failure() string {
	switch {
	case r.Step == "":
		return "the run failed"
	case r.Joined == 0:
		return "connected nobody"
	case r.Received == 0 && r.Sent > 0:
		return "delivered nothing"
	}
	return ""
}

// Measured reports whether the row's latencies and per-delivery figures
// mean anything: some message was delivered.
func (r TargetRow) Measured() bool { return r.Received > 0 }

// MemoryMeasured reports whether RSSPerConn means anything: clients joined
// and the server's memory was sampled. A target that connected nobody, or
// whose server the bench could not sample (no command, no pid), has no
// figure, not 0 bytes a connection.
func (r TargetRow) MemoryMeasured() bool { return r.Joined > 0 && r.RSS > 0 }

// Failed lists the targets with a failed row, in the rows' order.
func (t *Targets) Failed() []string {
	var out []string
	for _, r := range t.Rows {
		if r.Failure() != "" && !slices.Contains(out, r.Target) {
			out = append(out, r.Target)
		}
	}
	return out
}

// Targets is targets.json.
type Targets struct {
	Tool       string      `json:"tool"`
	Version    string      `json:"version"`
	Scenario   string      `json:"scenario"`
	StartedAt  time.Time   `json:"started_at"`
	EndedAt    time.Time   `json:"ended_at"`
	Args       []string    `json:"args"`
	Targets    []string    `json:"targets"` // names, in run order
	Pinning    string      `json:"pinning"`
	LoadBefore string      `json:"loadavg_before"`
	LoadAfter  string      `json:"loadavg_after"`
	Machine    string      `json:"machine"`
	Rows       []TargetRow `json:"rows"`
	// SLO holds the verdicts of bench compare --slo, on steps named
	// TARGET/STEP.
	SLO []SLOResult `json:"slo,omitempty"`
}

// TargetsHeader is the header row of targets.csv.
const TargetsHeader = "target,protocol,step,clients,joined,sent,expected,received,unexpected,errors,delivery_ratio," +
	"deliveries_per_second,p50_ms,p90_ms,p99_ms,max_ms,server_cpu_us_per_delivery,server_rss_bytes," +
	"server_rss_bytes_per_connection,generator_cpu_share,saturated,server_cpu_us_per_connect,note,server_cpu_note"

// WriteTargetsCSV writes rows with the header.
func WriteTargetsCSV(w io.Writer, rows []TargetRow) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(strings.Split(TargetsHeader, ",")); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range rows {
		if err := cw.Write([]string{r.Target, r.Protocol, r.Step, i(r.Clients), i(r.Joined), i(r.Sent), i(r.Expected), i(r.Received),
			i(r.Unexpected), i(r.Errors), strconv.FormatFloat(r.Ratio, 'f', 6, 64), f(r.PerSecond), f(r.P50), f(r.P90), f(r.P99), f(r.Max),
			f(r.CPUPerDelivery), i(r.RSS), f(r.RSSPerConn), f(r.GeneratorCPU), strconv.FormatBool(r.Saturated), f(r.CPUPerConnect), r.Note, r.CPUNote}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteTargetsJSON writes t into dir as targets.json.
func WriteTargetsJSON(dir string, t *Targets) error {
	return writeJSON(filepath.Join(dir, TargetsJSON), t)
}

// ReadTargets reads targets.json.
func ReadTargets(path string) (*Targets, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t Targets
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(t.Rows) == 0 {
		return nil, fmt.Errorf("%s holds no rows", path)
	}
	return &t, nil
}
