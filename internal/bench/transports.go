//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/scrape"
)

// The transports comparison (issue 9): for a growing number of clients,
// each client sends one message and waits for it to come back within a
// timeout, over WebSocket, HTTP long polling and plain HTTP polling, each
// run against a freshly started server pinned to the server CPU. Every
// client is alone in its room, so a message comes back to its sender only:
// what is measured is the transport, not the broadcast fan-out.

// TransportsOptions configure a comparison.
type TransportsOptions struct {
	Exe          string        // the scalechat binary (default: this one)
	Out          string        // results folder: transports.csv, transports.json, runs/
	Clients      []int         // client counts, in order
	Transports   []string      // a subset of results.TransportNames, in order (default all)
	Timeout      time.Duration // a message not back within this is an error
	PollWait     time.Duration // wait of a long poll
	PollInterval time.Duration // interval of plain polling
	MsgSize      int           // bytes of text per message
	Ramp         float64       // connects (first polls) per second
	Args         []string      // command line, for transports.json
	Version      string
	Stdout       io.Writer // the table
	Stderr       io.Writer // progress
}

// DefaultTransportsOptions are the comparison: 100 … 1,000 clients
// in steps of 50, an 11 s timeout, long polls of 25 s, polling every 500 ms.
func DefaultTransportsOptions() TransportsOptions {
	clients, _ := ClientSteps(100, 1000, 50)
	return TransportsOptions{Clients: clients, Transports: results.TransportNames, Timeout: 11 * time.Second,
		PollWait: 25 * time.Second, PollInterval: 500 * time.Millisecond, MsgSize: 256, Ramp: 1000}
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

// RunTransports runs the comparison and prints a table of it. It writes
// transports.csv and transports.json into opt.Out after every run, so an
// interrupted comparison keeps what it measured; each run's CSV, meta.json
// and logs go to opt.Out/runs.
func RunTransports(ctx context.Context, opt TransportsOptions) ([]results.ComparisonRow, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	r, _, err := newRunner(opt.Exe, filepath.Join(opt.Out, "runs"), false, opt.Stderr)
	if err != nil {
		return nil, err
	}
	rows, err := r.transports(ctx, opt)
	printTransports(opt.Stdout, rows)
	return rows, err
}

// transports runs the comparison with r's processes.
func (r *runner) transports(ctx context.Context, opt TransportsOptions) ([]results.ComparisonRow, error) {
	meta := results.ComparisonMeta{Tool: "scalechat bench transports", Version: opt.Version, StartedAt: time.Now().UTC(), Args: opt.Args,
		Clients: opt.Clients, Transports: opt.Transports, Timeout: opt.Timeout.String(), PollWait: opt.PollWait.String(),
		PollEvery: opt.PollInterval.String(), MsgSize: opt.MsgSize, Pinning: r.pinning(), LoadBefore: procstat.LoadAvg(),
		Machine: loadtest.InspectMachine().String()}
	var rows []results.ComparisonRow
	save := func() error {
		meta.EndedAt, meta.LoadAfter, meta.Interrupted = time.Now().UTC(), procstat.LoadAvg(), ctx.Err() != nil
		var b bytes.Buffer
		if err := results.WriteComparison(&b, rows); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(opt.Out, results.ComparisonCSV), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
		j, err := json.MarshalIndent(meta, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(opt.Out, results.ComparisonJSON), append(j, '\n'), 0o644)
	}
	r.logf("transports: %v at %d client counts (%d … %d), timeout %s; %s; load average %s",
		opt.Transports, len(opt.Clients), opt.Clients[0], opt.Clients[len(opt.Clients)-1], opt.Timeout, meta.Pinning, meta.LoadBefore)
	// The transports of one client count run one after another, so that a
	// noisy moment of this shared machine hits them alike.
	for _, n := range opt.Clients {
		for _, t := range opt.Transports {
			if ctx.Err() != nil {
				break
			}
			row, note, err := r.transportRun(ctx, opt, t, n)
			if err != nil {
				_ = save()
				return rows, fmt.Errorf("%s with %d clients: %w", t, n, err)
			}
			if note != "" {
				meta.Notes = append(meta.Notes, fmt.Sprintf("%s, %d clients: %s", t, n, note))
			}
			rows = append(rows, row)
			sat := ""
			if row.Saturated {
				sat = " (GENERATOR SATURATED)"
			}
			r.logf("%-12s %5d clients: %d errors, p50 %.1f ms, p99 %.1f ms, server CPU %.2f s, %.2f MB in, %.2f MB out%s",
				t, n, row.Errors, row.P50, row.P99, row.ServerCPU, float64(row.BytesIn)/1e6, float64(row.BytesOut)/1e6, sat)
			if err := save(); err != nil {
				return rows, err
			}
		}
	}
	if err := save(); err != nil {
		return rows, err
	}
	if err := ctx.Err(); err != nil {
		return rows, fmt.Errorf("interrupted: %w", err)
	}
	return rows, nil
}

// transportRun measures one transport at n clients against a fresh server.
func (r *runner) transportRun(ctx context.Context, opt TransportsOptions, transport string, n int) (results.ComparisonRow, string, error) {
	name := fmt.Sprintf("%s-%d", transport, n)
	port, err := freePort()
	if err != nil {
		return results.ComparisonRow{}, "", err
	}
	metricsURL := "http://127.0.0.1:" + itoa(port) + "/metrics"
	srv, err := r.startServer(ctx, name+"-server", "--metrics-addr", "127.0.0.1:"+itoa(port),
		// Every client posts from 127.0.0.1: the per-address POST limit
		// must not be what is measured. The same flags for every transport.
		"--rate-limit", "1000000", "--rate-burst", "1000000")
	if err != nil {
		return results.ComparisonRow{}, "", err
	}
	defer srv.shutdown(5 * time.Second)
	before, err := serverBytes(metricsURL)
	if err != nil {
		return results.ComparisonRow{}, "", err
	}
	cpu0 := srv.now().cpu
	args := []string{"--rooms", itoa(n), "--room-size", "1", "--msg-frequency", "1s", "--duration", "1s",
		"--msg-size", itoa(opt.MsgSize), "--ramp", strconv.FormatFloat(opt.Ramp, 'f', -1, 64),
		// Sends are due within 1 s: wait for the last one's timeout.
		"--drain", (opt.Timeout + time.Second).String(), "--connect-timeout", opt.Timeout.String()}
	url := wsURL(srv)
	switch transport {
	case results.LongPolling:
		url = "http://" + srv.addr
		args = append(args, "--transport", "poll", "--poll-wait", opt.PollWait.String())
	case results.Polling:
		url = "http://" + srv.addr
		args = append(args, "--transport", "poll", "--poll-interval", opt.PollInterval.String())
	}
	g, err := r.runLoadtest(ctx, name, url, 2*opt.Timeout+timeoutFor(n, opt.Ramp, time.Second), args...)
	if err != nil {
		return results.ComparisonRow{}, "", err
	}
	if err := srv.alive(); err != nil {
		return results.ComparisonRow{}, "", err
	}
	cpu1 := srv.now().cpu
	after, err := serverBytes(metricsURL)
	if err != nil {
		return results.ComparisonRow{}, "", err
	}
	if g.csv == "" {
		return results.ComparisonRow{}, "", fmt.Errorf("%s: the load test wrote no events; see %s", name, g.log)
	}
	s := g.step()
	row, err := Measure(transport, g.csv, s, opt.Timeout)
	if err != nil {
		return results.ComparisonRow{}, "", err
	}
	row.ServerCPU = (cpu1 - cpu0).Seconds()
	row.BytesIn, row.BytesOut = after[0]-before[0], after[1]-before[1]
	note := ""
	if s.FirstError != "" {
		note = "first error: " + s.FirstError
	}
	return row, note, nil
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

// runTransports is the comparison as a scenario of `scalechat bench`, with
// the default sizes (smoke: 10 and 20 clients, a 3 s timeout). Its results
// folder is transports/ in the bench's work folder (--dir).
func runTransports(ctx context.Context, r *runner) ([]Result, error) {
	opt := DefaultTransportsOptions()
	if r.smoke {
		opt.Clients, opt.Timeout = []int{10, 20}, 3*time.Second
	}
	opt.Out = filepath.Join(r.dir, "transports")
	if err := opt.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opt.Out, 0o755); err != nil {
		return nil, fmt.Errorf("create the results folder: %w", err)
	}
	trs, err := r.transports(ctx, opt)
	var rows []Result
	for _, t := range trs {
		row := Result{Scenario: fmt.Sprintf("transports %s n=%d", t.Transport, t.Clients), Clients: t.Clients, Ratio: -1,
			P50: t.P50, P99: t.P99, Max: t.Max, ServerCPU: t.ServerCPU, Saturated: t.Saturated,
			Figure: fmt.Sprintf("%d errors, %.2f MB", t.Errors, float64(t.BytesIn+t.BytesOut)/1e6)}
		if t.Sent > 0 {
			row.Ratio = float64(t.Received) / float64(t.Clients)
		}
		rows = append(rows, row)
	}
	if len(rows) > 0 {
		addNote(&rows[0], fmt.Sprintf("delivery = clients whose message came back within %s; results and report input: %s", opt.Timeout, opt.Out))
	}
	return rows, err
}
