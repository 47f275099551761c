//go:build linux

package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/scrape"
	"github.com/scalechat/scalechat/internal/slo"
)

// Options are the parts of a run that are not the scenario.
type Options struct {
	Stdout     io.Writer // the summary table
	Stderr     io.Writer // the machine line and live progress
	TTY        bool      // Stderr is a terminal: redraw one progress line
	Machine    Machine
	Version    string
	Executable string   // binary to start workers with (default os.Executable())
	WorkerArgs []string // arguments that select the hidden worker mode of Executable
}

// Result is the outcome of a run.
type Result struct {
	Meta     results.Meta
	Failures []string // connection errors, loss beyond --max-loss, dead workers
	// SLO is cfg.SLO judged on each step (also in Meta.SLO).
	SLO         []slo.Result
	Interrupted bool
}

// Run runs the load test in this process, or over cfg.Workers child
// processes, writes the CSV part(s) and meta.json, and prints the summary.
// ctx ends it gracefully (stop sending, drain, close), hard at once.
// With cfg.ServerMetrics (or cfg.ServerPIDs) it also scrapes those servers
// (reads those processes) once a second into
// results.ServerMetricsPath(cfg.Out), from the start to the end of the run.
func Run(ctx, hard context.Context, cfg *Config, opt Options) (*Result, error) {
	metaPath, parts := results.Paths(cfg.Out, cfg.Workers)
	res := &Result{Meta: results.Meta{
		Tool: "scalechat loadtest", Version: opt.Version, StartedAt: time.Now().UTC(), Args: cfg.Args,
		Machine: opt.Machine.Machine, Scenario: cfg.Scenario, URL: cfg.URL, Protocol: cfg.Protocol,
		RoomPrefix: cfg.RoomPrefix, Seed: cfg.Seed, Workers: cfg.Workers, Shard: fmt.Sprintf("%d/%d", cfg.Shard, cfg.Shards),
		Transport: cfg.Transport, Compression: cfg.Compression,
	}}
	if cfg.Transport == TransportPoll {
		if cfg.PollInterval > 0 {
			res.Meta.PollInterval = cfg.PollInterval
		} else {
			res.Meta.PollWait = cfg.PollWait
		}
	}
	for _, p := range parts {
		if !cfg.NoCSV {
			res.Meta.Parts = append(res.Meta.Parts, filepath.Base(p))
		}
	}
	if res.Meta.Parts == nil {
		res.Meta.Parts = []string{}
	}
	if res.Meta.Args == nil {
		res.Meta.Args = []string{}
	}
	if cfg.WatchesServers() {
		res.Meta.ServerMetrics = filepath.Base(results.ServerMetricsPath(cfg.Out))
	}
	agg := newAggregator(opt.Stderr, opt.TTY, opt.Machine.Cores)
	m := &merger{cfg: cfg, agg: agg, res: res, metaPath: metaPath, parts: cfg.Workers}
	if err := m.writeMeta(); err != nil {
		return nil, err
	}
	stopScraping := scrapeServers(cfg, opt.Stderr)
	var err error
	if cfg.Workers > 1 {
		err = runWorkers(ctx, hard, cfg, opt, parts, agg, m)
	} else {
		err = runPart(ctx, hard, cfg, &localCoord{agg: agg, m: m}, cfg.Out)
	}
	if serr := stopScraping(); err == nil {
		err = serr
	}
	agg.finish()
	m.flushIncomplete()
	res.Meta.EndedAt = time.Now().UTC()
	res.Interrupted = ctx.Err() != nil || hard.Err() != nil
	for _, s := range res.Meta.Steps {
		res.Failures = append(res.Failures, stepFailures(s, cfg.MaxLoss, cfg.MaxUnexpected)...)
	}
	if len(cfg.SLO) > 0 {
		res.SLO = judge(cfg, res.Meta.Steps, m.pooled(), opt.Stderr)
		res.Meta.SLO = res.SLO
	}
	if werr := m.writeMeta(); err == nil {
		err = werr
	}
	printSummary(opt.Stdout, res)
	return res, err
}

// scrapeServers starts scraping cfg.ServerMetrics into the run's server
// CSV, when there are any, and returns the function that stops it (after
// one last scrape) and says whether the file was written.
func scrapeServers(cfg *Config, stderr io.Writer) (stop func() error) {
	if !cfg.WatchesServers() {
		return func() error { return nil }
	}
	path := results.ServerMetricsPath(cfg.Out)
	ctx, cancel := context.WithCancel(context.Background())
	type outcome struct {
		sum scrape.Summary
		err error
	}
	done := make(chan outcome, 1)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() {
		sum, err := scrape.RecordServerCSV(ctx, path, cfg.ServerMetrics, cfg.ServerPIDs, log)
		done <- outcome{sum, err}
	}()
	return func() error {
		cancel()
		o := <-done
		if o.err != nil {
			return fmt.Errorf("server metrics: %w", o.err)
		}
		fmt.Fprintf(stderr, "server metrics: %d row(s) in %s, %d failed scrape(s)\n", o.sum.Rows, path, o.sum.Failed)
		return nil
	}
}

// localCoord coordinates the single part of a run without workers.
type localCoord struct {
	agg *aggregator
	m   *merger
}

func (c *localCoord) ready(_ context.Context, _ int, joined []int64) (int64, []int64, error) {
	// A short head start lets every loop arm its timer before the first due time.
	return time.Now().Add(20 * time.Millisecond).UnixMicro(), joined, nil
}

func (c *localCoord) progress(s Snapshot) { c.agg.update([]Snapshot{s}) }

func (c *localCoord) stepDone(r PartStep) { c.m.add(0, r) }

// merger turns the parts' step results into meta.json steps.
type merger struct {
	cfg      *Config
	agg      *aggregator
	res      *Result
	metaPath string
	parts    int

	mu       sync.Mutex
	runLat   *hdrhistogram.Histogram // every step's latencies, for run: objectives
	runConn  *hdrhistogram.Histogram // every step's connect times
	pending  map[int][]PartStep
	reported map[int]map[int]bool // step -> parts that reported it
	gone     map[int]bool         // parts that will report nothing more
}

func (m *merger) add(part int, r PartStep) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		m.pending = map[int][]PartStep{}
		m.reported = map[int]map[int]bool{}
	}
	if m.reported[r.Index] == nil {
		m.reported[r.Index] = map[int]bool{}
	}
	m.pending[r.Index] = append(m.pending[r.Index], r)
	m.reported[r.Index][part] = true
	m.finalizeComplete()
}

// partGone notes a part that will report nothing more (a dead worker).
func (m *merger) partGone(part int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone == nil {
		m.gone = map[int]bool{}
	}
	m.gone[part] = true
	m.finalizeComplete()
}

// finalizeComplete finalizes, in order, the steps every live part reported.
func (m *merger) finalizeComplete() {
	for k := range m.cfg.Steps {
		rs, ok := m.pending[k]
		if !ok {
			continue
		}
		all, missing := true, 0
		for p := range m.parts {
			if !m.reported[k][p] {
				if !m.gone[p] {
					all = false
				}
				missing++
			}
		}
		if !all {
			return
		}
		note := ""
		if missing > 0 {
			note = fmt.Sprintf("%d of %d parts reported", len(rs), m.parts)
		}
		m.finalize(k, note)
	}
}

// flushIncomplete finalizes steps some parts never reported.
func (m *merger) flushIncomplete() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.cfg.Steps {
		if rs, ok := m.pending[k]; ok && len(rs) > 0 {
			m.finalize(k, fmt.Sprintf("%d of %d parts reported", len(rs), m.parts))
		}
	}
}

func (m *merger) finalize(k int, incomplete string) {
	rs := m.pending[k]
	delete(m.pending, k)
	s := m.cfg.Steps[k]
	sm := results.StepMeta{
		Name: s.Name, Rooms: s.Rooms, RoomSize: s.RoomSize, RoomsPerClient: s.RoomsPerClient, Clients: s.Clients(),
		MsgFrequency: s.MsgFrequency, MsgSize: s.MsgSize, Duration: s.Duration, Ramp: s.Ramp, RoomSkew: s.RoomSkew,
		Senders: s.Senders, Incomplete: incomplete,
	}
	var c stepCounts
	var first firstErrors
	lat, lag, conn := newHist(), newHist(), newHist()
	for i, r := range rs {
		c.add(r.Counts)
		if i == 0 || r.StartedAt.Before(sm.StartedAt) {
			sm.StartedAt = r.StartedAt.UTC()
		}
		if r.EndedAt.After(sm.EndedAt) {
			sm.EndedAt = r.EndedAt.UTC()
		}
		sm.Interrupted = sm.Interrupted || r.Interrupted
		first.keep(r.first())
		decodeInto(lat, r.Lat)
		decodeInto(lag, r.Lag)
		decodeInto(conn, r.Conn)
		if !r.SendStart.IsZero() && (sm.SendStartedAt.IsZero() || r.SendStart.Before(sm.SendStartedAt)) {
			sm.SendStartedAt = r.SendStart.UTC()
		}
		if r.SendEnd.After(sm.SendEndedAt) {
			sm.SendEndedAt = r.SendEnd.UTC()
		}
	}
	sm.FirstError, sm.FirstServerError = first.conn, first.server
	sm.LocalClients, sm.Joined = c.Clients, c.Joined
	sm.Sent, sm.Expected, sm.Received, sm.ReceivedAll = c.Sent, c.Expected, c.Received, c.ReceivedAll
	sm.ConnectErrors, sm.Disconnects, sm.ServerErrors = c.ConnectErrors, c.Disconnects, c.ServerErrors
	sm.RateLimited, sm.Unavailable = c.RateLimited, c.Unavailable
	sm.Replayed, sm.OutOfOrder, sm.Invalid, sm.Unexpected = c.Replayed, c.OutOfOrder, c.Invalid, c.Unexpected
	sm.SendErrors, sm.PollErrors, sm.HistoryGaps = c.SendErrors, c.PollErrors, c.HistoryGaps
	sm.Lost = max(c.Expected-c.Received, 0)
	if c.Expected > 0 {
		sm.DeliveryRatio = float64(c.Received) / float64(c.Expected)
	}
	sm.LatencyMs = percentiles(lat)
	sm.SendLagMs = percentiles(lag)
	sm.ConnectMs = percentiles(conn)
	if m.runLat == nil {
		m.runLat, m.runConn = newHist(), newHist()
	}
	m.runLat.Merge(lat)
	m.runConn.Merge(conn)
	if r := m.agg.saturation(s.Name); r != "" {
		sm.Saturated, sm.SaturationReason = true, r
	}
	sm.NetworkFull = m.agg.networkFull(s.Name)
	m.res.Meta.Steps = append(m.res.Meta.Steps, sm)
	_ = m.writeMetaLocked()
}

func percentiles(h *hdrhistogram.Histogram) results.Percentiles {
	if h.TotalCount() == 0 {
		return results.Percentiles{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return results.Percentiles{P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max())}
}

func (m *merger) writeMeta() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writeMetaLocked()
}

// writeMetaLocked replaces meta.json atomically, so a killed run keeps the
// steps it finished.
func (m *merger) writeMetaLocked() error {
	if m.cfg.NoRecord {
		return nil
	}
	b, err := json.MarshalIndent(m.res.Meta, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(m.metaPath); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create results folder: %w", err)
		}
	}
	tmp := m.metaPath + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	if err := os.Rename(tmp, m.metaPath); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	return nil
}

// stepFailures lists what makes a step fail the run.
func stepFailures(s results.StepMeta, maxLoss float64, maxUnexpected int64) []string {
	var out []string
	if s.Unexpected > maxUnexpected {
		out = append(out, fmt.Sprintf("step %s: %d unexpected deliveries (from senders or rooms this run did not create; allowed %d)",
			s.Name, s.Unexpected, maxUnexpected))
	}
	if s.ConnectErrors > 0 {
		out = append(out, fmt.Sprintf("step %s: %d clients failed to connect or join (first error: %s)", s.Name, s.ConnectErrors, s.FirstError))
	}
	if s.Disconnects > 0 {
		out = append(out, fmt.Sprintf("step %s: %d connections dropped during the step (first error: %s)", s.Name, s.Disconnects, s.FirstError))
	}
	if n := s.SendErrors + s.PollErrors; n > 0 {
		out = append(out, fmt.Sprintf("step %s: %d HTTP requests failed (%d POSTs, %d polls; first error: %s)", s.Name, n, s.SendErrors, s.PollErrors, s.FirstError))
	}
	if s.Expected > 0 {
		loss := float64(s.Lost) / float64(s.Expected)
		if loss > maxLoss {
			out = append(out, fmt.Sprintf("step %s: lost %d of %d expected deliveries (%.3f%%, allowed %.3f%%)",
				s.Name, s.Lost, s.Expected, 100*loss, 100*maxLoss))
		}
	}
	if s.Incomplete != "" {
		out = append(out, fmt.Sprintf("step %s: incomplete, %s", s.Name, s.Incomplete))
	}
	return out
}

func printSummary(w io.Writer, res *Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tclients\tsent\texpected\treceived\tdelivery\tunexpected\tp50\tp90\tp99\tmax\terrors\trefused\tsaturated\t")
	for _, s := range res.Meta.Steps {
		delivery := "-"
		if s.Expected > 0 {
			delivery = fmt.Sprintf("%.3f%%", 100*s.DeliveryRatio)
		}
		sat := "no"
		if s.Saturated {
			sat = "YES: " + s.SaturationReason
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t\n", s.Name, s.LocalClients, s.Sent, s.Expected, s.Received, delivery, s.Unexpected,
			fmtMs(s.LatencyMs.P50), fmtMs(s.LatencyMs.P90), fmtMs(s.LatencyMs.P99), fmtMs(s.LatencyMs.Max),
			s.ConnectErrors+s.Disconnects+s.SendErrors+s.PollErrors, s.ServerErrors, sat)
	}
	tw.Flush()
	for _, s := range res.Meta.Steps {
		if s.ServerErrors > 0 {
			fmt.Fprintf(w, "step %s: the server refused %d messages with an error frame (%d unavailable: its cluster could not take them; %d rate_limited): their deliveries were expected, so they count as lost (first: %s)\n",
				s.Name, s.ServerErrors, s.Unavailable, s.RateLimited, s.FirstServerError)
		}
		if s.Saturated {
			fmt.Fprintf(w, "step %s: generator saturated (%s): results not valid\n", s.Name, s.SaturationReason)
		}
		if s.NetworkFull != "" {
			fmt.Fprintf(w, "step %s: the network ran full (%s): what the server got was capped by the link\n", s.Name, s.NetworkFull)
		}
	}
	slo.Print(w, res.SLO)
}

// pooled returns the run's steps as one, with the percentiles of every
// step's latencies and connects.
func (m *merger) pooled() results.StepMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := slo.Pool(m.res.Meta.Steps)
	if m.runLat != nil {
		w.LatencyMs, w.ConnectMs = percentiles(m.runLat), percentiles(m.runConn)
	}
	return w
}

// judge evaluates cfg.SLO on the run's steps and, for objectives naming
// the whole run (run:p99<50ms), on whole, with the servers' CPU from the
// run's server CSV when it scraped one.
func judge(cfg *Config, steps []results.StepMeta, whole results.StepMeta, stderr io.Writer) []slo.Result {
	var rows []results.ServerRow
	if cfg.WatchesServers() && !cfg.NoRecord {
		var err error
		if rows, _, err = results.ReadServer(results.ServerMetricsPath(cfg.Out)); err != nil {
			fmt.Fprintf(stderr, "SLO: server metrics not read, cpu_per_delivery not measured: %v\n", err)
		}
	}
	figs := make([]slo.Step, len(steps), len(steps)+1)
	for i, s := range steps {
		figs[i] = slo.FromMeta(s, rows)
	}
	figs = append(figs, slo.AsRun(slo.FromMeta(whole, nil), steps, rows))
	return slo.Evaluate(cfg.SLO, figs)
}

func fmtMs(ms float64) string {
	if ms == 0 {
		return "-"
	}
	return fmtUs(int64(ms * 1000))
}
