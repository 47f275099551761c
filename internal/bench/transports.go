//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/scrape"
)

// The transports comparison (issue 9) is scenarios/transports.yaml, a
// round_trip: benchmark (spec_roundtrip.go); scalechat bench transports
// runs it with its sizes from the command line and keeps its results
// folder for scalechat report.

// TransportsOptions configure a comparison: the file's parameters.
type TransportsOptions struct {
	Exe          string        // the scalechat binary (default: this one)
	Out          string        // results folder: transports.csv, transports.json, runs/
	Clients      []int         // client counts, in order (the file's sweep: rooms)
	Transports   []string      // a subset of results.TransportNames, in order (default all)
	Timeout      time.Duration // a message not back within this is an error (round_trip:)
	PollWait     time.Duration // wait of a long poll
	PollInterval time.Duration // interval of plain polling
	MsgSize      int           // bytes of text per message
	Ramp         float64       // connects (first polls) per second
	Args         []string      // command line, for transports.json
	Version      string
	Stdout       io.Writer // the table
	Stderr       io.Writer // progress
}

// DefaultTransportsOptions are scenarios/transports.yaml's: 100 … 1,000
// clients in steps of 50, an 11 s timeout, long polls of 25 s, polling
// every 500 ms. They are zero when the embedded file does not parse
// (a test keeps it parsing; RunTransports says why).
func DefaultTransportsOptions() TransportsOptions {
	sp, err := shippedSpec("transports")
	if err != nil || sp.bench.Sweep == nil || len(sp.sc.Steps) == 0 {
		return TransportsOptions{}
	}
	b, st := sp.bench, sp.sc.Steps[0]
	return TransportsOptions{Clients: b.Sweep.Rooms, Transports: b.Sweep.Transport, Timeout: b.RoundTrip.D(),
		PollWait: b.PollWait.D(), PollInterval: b.PollInterval.D(), MsgSize: st.MsgSize, Ramp: st.Ramp}
}

// ClientSteps returns from, from+step, … up to to.
func ClientSteps(from, to, step int) ([]int, error) {
	if from < 1 || to < from || step < 1 {
		return nil, fmt.Errorf("clients %d … %d in steps of %d: want 1 ≤ from ≤ to and a step of at least 1", from, to, step)
	}
	var out []int
	for n := from; n <= to; n += step {
		out = append(out, n)
	}
	return out, nil
}

func (o *TransportsOptions) validate() error {
	if len(o.Clients) == 0 {
		return errors.New("no client counts to run")
	}
	if len(o.Transports) == 0 {
		o.Transports = results.TransportNames
	}
	for _, t := range o.Transports {
		if !slices.Contains(results.TransportNames, t) {
			return fmt.Errorf("transport %q is not one of websocket, long-polling, polling", t)
		}
	}
	switch {
	case o.Out == "":
		return errors.New("no results folder")
	case o.Timeout <= 0:
		return errors.New("the timeout must be positive")
	case o.PollWait <= 0 || o.PollWait > 60*time.Second:
		return errors.New("the long poll wait must be between 0 and 60s (the server's maximum)")
	case o.PollInterval <= 0:
		return errors.New("the poll interval must be positive")
	case o.MsgSize < 0 || o.MsgSize > 16000:
		return errors.New("the message size must be between 0 and 16,000 bytes (the server's default limit is 16 KiB)")
	case o.Ramp <= 0:
		return errors.New("the ramp must be positive")
	}
	return nil
}

// RunTransports runs scenarios/transports.yaml with opt's parameters
// and prints a table of it. It writes transports.csv and transports.json
// into opt.Out after every run, so an interrupted comparison keeps what
// it measured; each run's CSV, meta.json and logs go to opt.Out/runs.
func RunTransports(ctx context.Context, opt TransportsOptions) ([]results.ComparisonRow, error) {
	sp, err := shippedSpec("transports")
	if err != nil {
		return nil, err
	}
	if err := opt.validate(); err != nil {
		return nil, err
	}
	sp.bench.Sweep = &specSweep{Rooms: opt.Clients, Transport: opt.Transports}
	sp.bench.RoundTrip, sp.bench.PollWait, sp.bench.PollInterval = loadtest.Duration(opt.Timeout), loadtest.Duration(opt.PollWait), loadtest.Duration(opt.PollInterval)
	for i := range sp.sc.Steps {
		sp.sc.Steps[i].MsgSize, sp.sc.Steps[i].Ramp = opt.MsgSize, opt.Ramp
	}
	if err := sp.check(); err != nil {
		return nil, fmt.Errorf("transports: %w", err)
	}
	sp.out = &comparisonOut{dir: opt.Out, args: opt.Args, version: opt.Version}
	r, _, err := newRunner(opt.Exe, filepath.Join(opt.Out, "runs"), false, opt.Stderr)
	if err != nil {
		return nil, err
	}
	_, err = r.runSpec(ctx, sp)
	printTransports(opt.Stdout, sp.out.rows)
	return sp.out.rows, err
}

// serverBytes reads the bytes a server read and wrote so far, WebSocket and
// HTTP together, from its metrics.
func serverBytes(url string) ([2]int64, error) {
	var out [2]int64
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return out, fmt.Errorf("read the server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("read the server's metrics: %s", resp.Status)
	}
	fams, err := scrape.ParseText(resp.Body)
	if err != nil {
		return out, fmt.Errorf("read the server's metrics: %w", err)
	}
	want := map[string]int{
		"scalechat_received_bytes_total": 0, "scalechat_http_received_bytes_total": 0,
		"scalechat_sent_bytes_total": 1, "scalechat_http_sent_bytes_total": 1,
	}
	found := 0
	for _, f := range fams {
		i, ok := want[f.GetName()]
		if !ok {
			continue
		}
		found++
		for _, m := range f.GetMetric() {
			out[i] += int64(m.GetCounter().GetValue())
		}
	}
	if found != len(want) {
		return out, fmt.Errorf("the server's metrics lack its byte counters (%d of %d found)", found, len(want))
	}
	return out, nil
}

// printTransports writes the comparison as a table.
func printTransports(w io.Writer, rows []results.ComparisonRow) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "%-13s %7s %6s %7s %6s %9s %9s %9s %9s %8s %8s %9s\n",
		"transport", "clients", "sent", "back", "errors", "p50", "p90", "p99", "max", "srv CPU", "MB in", "MB out")
	for _, r := range rows {
		sat := ""
		if r.Saturated {
			sat = "  generator saturated"
		}
		fmt.Fprintf(w, "%-13s %7d %6d %7d %6d %9s %9s %9s %9s %7.2fs %8.2f %9.2f%s\n",
			r.Transport, r.Clients, r.Sent, r.Received, r.Errors, ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max),
			r.ServerCPU, float64(r.BytesIn)/1e6, float64(r.BytesOut)/1e6, sat)
	}
}
