//go:build linux

package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
)

// A benchmark with bench: round_trip: T measures round trips: in each
// step every client, alone in its room (room_size 1), sends one message
// and waits for it to come back within T, over its step's transport,
// against its setup's one server. A step's row is then the clients whose
// message came back in time (delivery), the round trips' percentiles,
// the server's CPU over the whole run (connects included) and the bytes
// it read and wrote; with comparison:, every run is also a row of
// transports.csv, which scalechat report draws. scenarios/transports.yaml
// is one.

// smokeRoundTrip bounds a round trip's wait with --smoke.
const smokeRoundTrip = 3 * time.Second

// comparisonOut is where a round_trip: run writes its comparison files,
// and what they say of the command that ran it.
type comparisonOut struct {
	dir     string // "": the work folder's bench: comparison: folder
	args    []string
	version string
	rows    []results.ComparisonRow // what it measured so far
	notes   []string                // transports.json's notes: each run's first error
}

// transport is a step's transport: websocket unless its bench: says.
func (sp *spec) transport(st loadtest.Step) string {
	return cmp.Or(sp.stepBench[st.Name].Transport, results.WebSocket)
}

// roundTrip is how long a round trip may take in this run.
func (sp *spec) roundTrip(smoke bool) time.Duration {
	if smoke {
		return min(sp.bench.RoundTrip.D(), smokeRoundTrip)
	}
	return sp.bench.RoundTrip.D()
}

// runRoundTrips runs a round_trip: benchmark's steps one after another,
// each against its setup's server, writing the comparison files (when
// the file names a folder for them) after every step, so an interrupted
// run keeps what it measured.
func (r *runner) runRoundTrips(ctx context.Context, sp *spec, steps []loadtest.Step) ([]Result, error) {
	out := cmp.Or(sp.out, &comparisonOut{})
	sp.out = out
	if out.dir == "" && sp.bench.Comparison != "" {
		out.dir = filepath.Join(r.dir, sp.bench.Comparison)
	}
	save, err := r.comparisonSaver(ctx, sp, steps)
	if err != nil {
		return nil, err
	}
	setups := newSpecSetups(r, sp)
	defer setups.stop()
	var rows []Result
	for i, st := range steps {
		if ctx.Err() != nil {
			break
		}
		got, c, err := r.roundTripStep(ctx, sp, setups, st)
		setups.endGroup(steps[i+1:])
		if err != nil {
			_ = save()
			return rows, fmt.Errorf("step %s: %w", st.Name, err)
		}
		out.rows = append(out.rows, c)
		rows = append(rows, got.row)
		sat := ""
		if c.Saturated {
			sat = " (GENERATOR SATURATED)"
		}
		r.logf("%-12s %5d clients: %d errors, p50 %.1f ms, p99 %.1f ms, server CPU %.2f s, %.2f MB in, %.2f MB out%s",
			c.Transport, c.Clients, c.Errors, c.P50, c.P99, c.ServerCPU, float64(c.BytesIn)/1e6, float64(c.BytesOut)/1e6, sat)
		if err := save(); err != nil {
			return rows, err
		}
	}
	if len(rows) > 0 {
		where := ""
		if out.dir != "" {
			where = "; results and report input: " + out.dir
		}
		addNote(&rows[0], fmt.Sprintf("delivery = clients whose message came back within %s%s", sp.roundTrip(r.smoke), where))
	}
	if err := save(); err != nil {
		return rows, err
	}
	if err := ctx.Err(); err != nil {
		return rows, fmt.Errorf("interrupted: %w", err)
	}
	return rows, nil
}

// comparisonSaver returns what writes the run so far as transports.csv
// and transports.json in the comparison folder; it does nothing when
// there is none.
func (r *runner) comparisonSaver(ctx context.Context, sp *spec, steps []loadtest.Step) (func() error, error) {
	out := sp.out
	if out.dir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(out.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the results folder: %w", err)
	}
	meta := results.ComparisonMeta{Tool: "scalechat bench " + sp.sc.Name, Version: out.version, StartedAt: time.Now().UTC(), Args: out.args,
		Timeout: sp.roundTrip(r.smoke).String(), PollWait: sp.bench.PollWait.D().String(), PollEvery: sp.bench.PollInterval.D().String(),
		Pinning: r.pinning(), LoadBefore: procstat.LoadAvg(), Machine: loadtest.InspectMachine().String()}
	for _, st := range steps {
		if !slices.Contains(meta.Clients, st.Clients()) {
			meta.Clients = append(meta.Clients, st.Clients())
		}
		if t := sp.transport(st); !slices.Contains(meta.Transports, t) {
			meta.Transports = append(meta.Transports, t)
		}
		meta.MsgSize = st.MsgSize
	}
	return func() error {
		meta.EndedAt, meta.LoadAfter, meta.Interrupted = time.Now().UTC(), procstat.LoadAvg(), ctx.Err() != nil
		meta.Notes = out.notes
		var b bytes.Buffer
		if err := results.WriteComparison(&b, out.rows); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out.dir, results.ComparisonCSV), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
		j, err := json.MarshalIndent(meta, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out.dir, results.ComparisonJSON), append(j, '\n'), 0o644); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
		return nil
	}, nil
}

// roundTripStep runs one step of a round_trip: benchmark: its generator
// against its setup's server, the server's CPU and bytes read around the
// whole run.
func (r *runner) roundTripStep(ctx context.Context, sp *spec, setups *specSetups, st loadtest.Step) (specStep, results.ComparisonRow, error) {
	var none results.ComparisonRow
	procs, err := setups.forGroup(ctx, []loadtest.Step{st})
	if err != nil {
		return specStep{}, none, err
	}
	p := procs[0]
	if len(p.cl.nodes) != 1 || len(p.meters) != 1 {
		return specStep{}, none, errors.New("round_trip: needs one server with its metrics listener")
	}
	srv := p.cl.nodes[0]
	before, err := serverBytes(p.meters[0])
	if err != nil {
		return specStep{}, none, err
	}
	cpu0 := srv.now().cpu
	timeout := sp.roundTrip(r.smoke)
	// Sends are due within the step: wait for the last one's round trip.
	st.Drain = loadtest.Duration(timeout + time.Second)
	args := append(stepArgs(st), "--connect-timeout", timeout.String())
	url, targs := sp.transportArgs(st, srv)
	args = append(append(args, targs...), sp.stepBench[st.Name].Args...)
	limit := 2*timeout + timeoutFor(st.Clients(), st.Ramp, st.Duration.D())
	g, err := r.runLoadtest(ctx, safeName(sp.fileTag()+"-"+st.Name), url, limit, args...)
	if err != nil {
		return specStep{}, none, err
	}
	if err := srv.alive(); err != nil {
		return specStep{}, none, err
	}
	cpu := srv.now().cpu - cpu0
	after, err := serverBytes(p.meters[0])
	if err != nil {
		return specStep{}, none, err
	}
	if g.csv == "" {
		return specStep{}, none, fmt.Errorf("the load test wrote no events; see %s", g.log)
	}
	s := g.step()
	c, err := Measure(sp.transport(st), g.csv, s, timeout)
	if err != nil {
		return specStep{}, none, err
	}
	c.ServerCPU = cpu.Seconds()
	c.BytesIn, c.BytesOut = after[0]-before[0], after[1]-before[1]
	for _, e := range firstErrors(s) {
		sp.out.notes = append(sp.out.notes, fmt.Sprintf("%s, %d clients: first error: %s", c.Transport, c.Clients, e))
	}
	return sp.roundTripRow(st, c, s), c, nil
}

// firstErrors are a step's first errors of each kind it had: why a client
// failed or was dropped, and the server's first error frame.
func firstErrors(s results.StepMeta) []string {
	var out []string
	for _, e := range []string{s.FirstError, s.FirstServerError} {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// transportArgs are the URL and the loadtest flags of a step's transport.
func (sp *spec) transportArgs(st loadtest.Step, srv *proc) (string, []string) {
	switch sp.transport(st) {
	case results.LongPolling:
		return "http://" + srv.addr, []string{"--transport", "poll", "--poll-wait", sp.bench.PollWait.D().String()}
	case results.Polling:
		return "http://" + srv.addr, []string{"--transport", "poll", "--poll-interval", sp.bench.PollInterval.D().String()}
	}
	return wsURL(srv), nil
}

// roundTripRow is a round_trip: step's row, judged against the file's
// objectives on its figures.
func (sp *spec) roundTripRow(st loadtest.Step, c results.ComparisonRow, s results.StepMeta) specStep {
	row := Result{Scenario: sp.rowName(st), Clients: c.Clients, Ratio: -1, P50: c.P50, P99: c.P99, Max: c.Max,
		ServerCPU: c.ServerCPU, Saturated: c.Saturated, step: st.Name}
	figs := map[string]float64{"errors": float64(c.Errors), "megabytes": float64(c.BytesIn+c.BytesOut) / 1e6}
	if c.Sent > 0 {
		row.Ratio = float64(c.Received) / float64(c.Clients)
		figs["delivery"], figs["loss"] = row.Ratio, 1-row.Ratio
		figs["bytes_in_per_message"] = float64(c.BytesIn) / float64(c.Sent)
		figs["bytes_out_per_message"] = float64(c.BytesOut) / float64(c.Sent)
	}
	if c.P50 > 0 {
		figs["p50"], figs["p99"], figs["max"] = c.P50, c.P99, c.Max
	}
	for _, e := range firstErrors(s) {
		addNote(&row, "first error: "+e)
	}
	if c.Saturated {
		addNote(&row, "generator saturated: "+s.SaturationReason)
	}
	figure := sp.stepBench[st.Name].Figure
	if figure == nil {
		figure = sp.bench.Figure
	}
	row.Figure = figureColumn(figure, figs, row)
	row.Loops, row.figs = sp.loops, figs
	got := specStep{step: st, row: row, figures: figs}
	got.met = sp.judge(&got)
	return got
}
