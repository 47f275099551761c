package transports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
)

// Options configure a comparison.
type Options struct {
	Exe          string        // the scalechat binary, started as server and as load generator
	Dir          string        // results folder: transports.csv, transports.json, runs/
	Clients      []int         // step sizes, in order
	Transports   []string      // a subset of Names, in order
	Timeout      time.Duration // a message not back within this is an error
	PollWait     time.Duration // wait of a long poll
	PollInterval time.Duration // interval of plain polling
	MsgSize      int           // bytes of text per message
	Ramp         float64       // connects (first polls) per second
	Args         []string      // command line, for transports.json
	Version      string
	Stderr       io.Writer // progress
}

// Steps returns from, from+step, … up to to.
func Steps(from, to, step int) ([]int, error) {
	if from < 1 || to < from || step < 1 {
		return nil, fmt.Errorf("clients %d … %d step %d: want 1 ≤ from ≤ to and step ≥ 1", from, to, step)
	}
	var out []int
	for n := from; n <= to; n += step {
		out = append(out, n)
	}
	return out, nil
}

func (o *Options) validate() error {
	if len(o.Clients) == 0 {
		return errors.New("no client counts to run")
	}
	if len(o.Transports) == 0 {
		o.Transports = Names
	}
	for _, t := range o.Transports {
		if !contains(Names, t) {
			return fmt.Errorf("transport %q is not one of websocket, long-polling, polling", t)
		}
	}
	switch {
	case o.Timeout <= 0:
		return errors.New("the timeout must be positive")
	case o.PollWait <= 0 || o.PollWait > 60*time.Second:
		return errors.New("the long poll wait must be between 0 and 60s")
	case o.PollInterval <= 0:
		return errors.New("the poll interval must be positive")
	case o.MsgSize < 0 || o.MsgSize > 16<<10:
		return errors.New("the message size must be between 0 and 16 KiB (the server's default limit)")
	case o.Ramp <= 0:
		return errors.New("the ramp must be positive")
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Run runs every transport at every client count, each against a freshly
// started server, and writes transports.csv and transports.json into
// opt.Dir after every run (so an interrupted comparison keeps what it
// measured). Client counts run in order, the transports of one count one
// after another, so that a noisy moment of the machine hits them alike.
func Run(ctx context.Context, opt Options) ([]Row, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(opt.Dir, "runs"), 0o755); err != nil {
		return nil, fmt.Errorf("create the results folder: %w", err)
	}
	h, err := newHost(opt.Exe, opt.Dir, opt.Stderr)
	if err != nil {
		return nil, err
	}
	m := loadtest.InspectMachine()
	meta := Meta{Tool: "scalechat bench transports", Version: opt.Version, StartedAt: time.Now().UTC(), Args: opt.Args,
		Clients: opt.Clients, Transports: opt.Transports, Timeout: opt.Timeout.String(), PollWait: opt.PollWait.String(),
		PollEvery: opt.PollInterval.String(), MsgSize: opt.MsgSize, Pinning: h.pinning(), LoadBefore: loadavg(), Machine: m.String()}
	var rows []Row
	save := func() error {
		meta.EndedAt, meta.LoadAfter = time.Now().UTC(), loadavg()
		meta.Interrupted = ctx.Err() != nil
		var b bytes.Buffer
		if err := WriteCSV(&b, rows); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(opt.Dir, ResultsCSV), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
		j, err := json.MarshalIndent(meta, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(opt.Dir, ResultsJSON), append(j, '\n'), 0o644)
	}
	h.logf("comparing %v over %d client counts (%d … %d), timeout %s; %s; load average %s",
		opt.Transports, len(opt.Clients), opt.Clients[0], opt.Clients[len(opt.Clients)-1], opt.Timeout, meta.Pinning, meta.LoadBefore)
	for _, n := range opt.Clients {
		for _, t := range opt.Transports {
			if ctx.Err() != nil {
				break
			}
			row, note, err := runOne(ctx, h, opt, t, n)
			if err != nil {
				_ = save()
				return rows, fmt.Errorf("%s with %d clients: %w", t, n, err)
			}
			if note != "" {
				meta.Notes = append(meta.Notes, fmt.Sprintf("%s, %d clients: %s", t, n, note))
			}
			rows = append(rows, row)
			h.logf("%-12s %5d clients: %d errors, p50 %.1f ms, p99 %.1f ms, server CPU %.2f s, %.2f MB in, %.2f MB out%s",
				t, n, row.Errors, row.P50, row.P99, row.ServerCPU, float64(row.BytesIn)/1e6, float64(row.BytesOut)/1e6, satNote(row.Saturated))
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

func satNote(s bool) string {
	if s {
		return " (GENERATOR SATURATED)"
	}
	return ""
}

// runOne measures one transport at n clients against a fresh server.
func runOne(ctx context.Context, h *host, opt Options, transport string, n int) (Row, string, error) {
	name := fmt.Sprintf("%s-%d", transport, n)
	srv, err := h.startServer(ctx, name+"-server",
		// Every client posts from 127.0.0.1: the per-address POST limit
		// must not be what is measured. Same flags for every transport.
		"--rate-limit", "1000000", "--rate-burst", "1000000")
	if err != nil {
		return Row{}, "", err
	}
	defer srv.stop()
	before, err := srv.counters()
	if err != nil {
		return Row{}, "", err
	}
	args := []string{"--rooms", strconv.Itoa(n), "--room-size", "1", "--msg-frequency", "1s", "--duration", "1s",
		"--msg-size", strconv.Itoa(opt.MsgSize), "--ramp", strconv.FormatFloat(opt.Ramp, 'f', -1, 64),
		// Sends are due within 1 s; wait for the last one's timeout.
		"--drain", (opt.Timeout + time.Second).String(), "--connect-timeout", opt.Timeout.String(), "--pause", "0s"}
	url := "ws://" + srv.addr + "/ws"
	switch transport {
	case LongPolling:
		url = "http://" + srv.addr
		args = append(args, "--transport", "poll", "--poll-wait", opt.PollWait.String())
	case Polling:
		url = "http://" + srv.addr
		args = append(args, "--transport", "poll", "--poll-interval", opt.PollInterval.String())
	}
	limit := opt.Timeout*2 + time.Duration(float64(n)/opt.Ramp*float64(time.Second)) + 30*time.Second
	gen, err := h.runLoadtest(ctx, name, url, limit, args...)
	if err != nil {
		return Row{}, "", err
	}
	if err := srv.alive(); err != nil {
		return Row{}, "", err
	}
	after, err := srv.counters()
	if err != nil {
		return Row{}, "", err
	}
	row, err := Measure(transport, gen.events, gen.step, opt.Timeout)
	if err != nil {
		return Row{}, "", err
	}
	row.ServerCPU = (after.cpu - before.cpu).Seconds()
	row.BytesIn, row.BytesOut = after.bytesIn-before.bytesIn, after.bytesOut-before.bytesOut
	note := ""
	if gen.step.FirstError != "" {
		note = "first error: " + gen.step.FirstError
	}
	return row, note, nil
}

// loadavg returns the 1-, 5- and 15-minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := bytes.Fields(b)
	if len(f) < 3 {
		return "?"
	}
	return string(bytes.Join(f[:3], []byte(" ")))
}
