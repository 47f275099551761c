//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
)

// The targets comparison (issue 13): the steps of one scenario file run
// against each of its targets, one after another, each target alone on the
// machine: a server the bench starts (pinned to the server CPU, sampled
// from /proc, stopped after) or one already running that it watches by
// PID. The load generator is `scalechat loadtest --protocol P`, pinned to
// the generator CPU.

// CompareOptions configure a comparison.
type CompareOptions struct {
	File  string // scenario file with targets
	Out   string // results folder: targets.csv, targets.json, runs/
	Smoke bool   // every step shrunk to a few clients for a second: proves it works, measures nothing
	Exe   string // the scalechat binary (default: this one)
	// ServerCPUs and GeneratorCPUs are CPU lists as scalechat bench's
	// (empty: the default split).
	ServerCPUs, GeneratorCPUs string
	// JSON, when set, also writes the rows as a results file (scalechat
	// bench --json FILE.yaml), with Command as the command that measures
	// it again.
	JSON, Command string
	Args          []string
	Version       string
	Stdout        io.Writer // the table
	Stderr        io.Writer // progress
}

// RunCompare runs the comparison and writes its results folder.
func RunCompare(ctx context.Context, opt CompareOptions) error {
	sc, err := loadtest.LoadScenario(opt.File, loadtest.DefaultStep())
	if err != nil {
		return err
	}
	if len(sc.Targets) == 0 {
		sc.Targets = []loadtest.Target{scalechatTarget()}
	}
	if err := checkTargets(sc.Targets); err != nil {
		return fmt.Errorf("%s: %w", opt.File, err)
	}
	if opt.Smoke {
		smokeSteps(sc)
	}
	r, cleanup, err := newRunner(opt.Exe, filepath.Join(opt.Out, "runs"), opt.Smoke, opt.Stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := r.setCPUs(opt.ServerCPUs, opt.GeneratorCPUs); err != nil {
		return err
	}
	steps := filepath.Join(r.dir, "steps.yaml")
	if err := writeSteps(steps, sc); err != nil {
		return err
	}
	meta := results.Targets{Tool: "scalechat bench compare", Version: opt.Version, Scenario: sc.Name, StartedAt: time.Now().UTC(),
		Args: opt.Args, Pinning: r.pinning(), LoadBefore: procstat.LoadAvg(), Machine: loadtest.InspectMachine().String()}
	for _, t := range sc.Targets {
		if ctx.Err() != nil {
			break
		}
		meta.Targets = append(meta.Targets, t.Name)
		rows, err := r.compareTarget(ctx, t, steps, sc)
		meta.Rows = append(meta.Rows, rows...)
		if err != nil {
			meta.Rows = append(meta.Rows, results.TargetRow{Target: t.Name, Protocol: t.Protocol, Note: failedNote(err.Error())})
			r.logf("target %s failed: %v", t.Name, err)
		}
	}
	meta.EndedAt, meta.LoadAfter = time.Now().UTC(), procstat.LoadAvg()
	if err := writeTargets(opt.Out, &meta); err != nil {
		return err
	}
	printTargets(opt.Stdout, &meta)
	if opt.JSON != "" {
		if err := r.writeResults(opt.JSON, targetResults(sc.Name, meta.Rows), meta.StartedAt, opt.Command, meta.LoadBefore); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if failed := meta.Failed(); len(failed) > 0 {
		return fmt.Errorf("target(s) %s failed or measured nothing (see the notes and %s)", strings.Join(failed, ", "), r.dir)
	}
	return nil
}

// smokeSteps shrinks every step to at most 3 rooms of 4 clients for a
// second, with no pause between steps: it proves the file runs, and
// measures nothing.
func smokeSteps(sc *loadtest.Scenario) {
	none := loadtest.Duration(0)
	sc.Pause = &none
	for i := range sc.Steps {
		s := &sc.Steps[i]
		s.Rooms, s.RoomSize, s.NumClients, s.Senders = min(s.Rooms, 3), min(s.RoomSize, 4), 0, 0
		s.RoomsPerClient = min(s.RoomsPerClient, s.Rooms)
		s.Duration, s.Drain = loadtest.Duration(time.Second), loadtest.Duration(2*time.Second)
	}
}

// scalechatTarget is the server of a scenario file that names none: this
// binary's scalechat serve with its defaults, on a free port.
func scalechatTarget() loadtest.Target {
	return loadtest.Target{Name: "scalechat", Protocol: "scalechat", URL: "ws://127.0.0.1:{port}/ws",
		Command: []string{"{scalechat}", "serve", "--addr", "127.0.0.1:{port}", "--log-level", "warn"},
		Ready:   "http://127.0.0.1:{port}/readyz"}
}

// failedNote is the note of a row that measured nothing: FAILED and why.
func failedNote(why string) string { return "FAILED: " + why }

// checkTargets refuses a file whose targets cannot run.
func checkTargets(ts []loadtest.Target) error {
	if len(ts) == 0 {
		return errors.New("no targets: list them under targets: (name, protocol, url, and command or pid)")
	}
	seen := map[string]bool{}
	for i, t := range ts {
		switch {
		case t.Name == "" || seen[t.Name]:
			return fmt.Errorf("target %d: every target needs a name of its own", i+1)
		case t.URL == "":
			return fmt.Errorf("target %s: url is required", t.Name)
		case len(t.Command) > 0 && t.PID > 0:
			return fmt.Errorf("target %s: give command or pid, not both", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// writeSteps writes the scenario's steps, as the generator will run them.
func writeSteps(path string, sc *loadtest.Scenario) error {
	file := struct {
		Name  string             `yaml:"name"`
		Pause *loadtest.Duration `yaml:"pause,omitempty"`
		Steps []loadtest.Step    `yaml:"steps"`
	}{sc.Name, sc.Pause, sc.Steps}
	b, err := yaml.Marshal(file)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// compareTarget runs every step against one target.
func (r *runner) compareTarget(ctx context.Context, t loadtest.Target, steps string, sc *loadtest.Scenario) ([]results.TargetRow, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	expand := strings.NewReplacer("{port}", strconv.Itoa(port), "{scalechat}", r.exe)
	u := expand.Replace(t.URL)
	var srv *sampler
	switch {
	case len(t.Command) > 0:
		args := make([]string, len(t.Command))
		for i, a := range t.Command {
			args[i] = expand.Replace(a)
		}
		p, err := r.startProc(t.Name+"-server", r.command(context.WithoutCancel(ctx), r.serverList(), args[0], args[1:]...))
		if err != nil {
			return nil, err
		}
		defer p.shutdown(5 * time.Second)
		r.logf("%s: %s (pid %d)", t.Name, strings.Join(args, " "), p.pid)
		if err := waitReady(ctx, p, expand.Replace(t.Ready), u); err != nil {
			return nil, err
		}
		srv = p.sampler
	case t.PID > 0:
		if _, err := readStat(t.PID); err != nil {
			return nil, fmt.Errorf("pid %d: %w", t.PID, err)
		}
		srv = startSampler(t.PID, nil)
		defer srv.halt()
	}
	time.Sleep(300 * time.Millisecond) // let a fresh server settle before its idle RSS is read
	var base sample
	if srv != nil {
		base = srv.now()
	}
	clients := 0
	for _, s := range sc.Steps {
		clients = max(clients, s.Clients())
	}
	timeout := 45 * time.Second
	for _, s := range sc.Steps {
		timeout += timeoutFor(s.Clients(), s.Ramp, s.Duration.D()+s.Drain.D())
	}
	args := []string{"--scenario", steps, "--protocol", t.Protocol, "--connect-timeout", "10s"}
	if t.Namespace != "" {
		args = append(args, "--namespace", t.Namespace)
	}
	if loopbackURL(u) {
		args = append(args, "--source-ips", sources) // past one address's ephemeral ports
	}
	g, err := r.startLoadtest(ctx, t.Name, u, timeout, args...)
	if err != nil {
		return nil, err
	}
	run, err := g.wait()
	if err != nil {
		return nil, err
	}
	rows := make([]results.TargetRow, 0, len(run.meta.Steps))
	for _, s := range run.meta.Steps {
		rows = append(rows, targetRow(t, s, run, srv, base))
	}
	return rows, nil
}

// cpuPer returns cpu in µs per n, or 0 and true, with the reason added to
// row's CPUNote, when cpu holds too few clock ticks to be read to 10 %.
func cpuPer(row *results.TargetRow, what string, cpu time.Duration, n int64) (float64, bool) {
	if !results.CPUReadable(cpu) {
		row.CPUNote = joinNote(row.CPUNote, results.CPUTooFew(what, cpu))
		return 0, true
	}
	return float64(cpu.Nanoseconds()) / 1e3 / float64(n), false
}

// joinNote adds note to notes, "; " between.
func joinNote(notes, note string) string {
	if notes == "" || note == "" {
		return notes + note
	}
	return notes + "; " + note
}

// targetRow reads one step's figures: the generator's from its meta.json,
// the server's from its samples over the step's sending window.
func targetRow(t loadtest.Target, s results.StepMeta, g *genRun, srv *sampler, base sample) results.TargetRow {
	row := results.TargetRow{Target: t.Name, Protocol: t.Protocol, Step: s.Name, Clients: int64(s.Clients), Joined: s.Joined,
		Sent: s.Sent, Expected: s.Expected, Received: s.Received, Unexpected: s.Unexpected, Errors: s.ConnectErrors + s.Disconnects,
		Ratio: s.DeliveryRatio, P50: s.LatencyMs.P50, P90: s.LatencyMs.P90, P99: s.LatencyMs.P99, Max: s.LatencyMs.Max,
		Saturated: s.Saturated}
	win := s.SendEndedAt.Sub(s.SendStartedAt).Seconds()
	if win > 0 {
		row.PerSecond = float64(s.ReceivedAll) / win
		if g.samples != nil {
			row.GeneratorCPU = g.samples.cpuBetween(s.SendStartedAt, s.SendEndedAt).Seconds() / win
		}
	}
	if srv != nil && !s.SendStartedAt.IsZero() {
		if s.ReceivedAll > 0 {
			row.CPUPerDelivery, row.CPUDeliveryTooFew = cpuPer(&row, "CPU/delivery", srv.cpuBetween(s.SendStartedAt, s.SendEndedAt), s.ReceivedAll)
		}
		row.RSS = srv.maxRSS(s.SendStartedAt, s.SendEndedAt)
		if s.Joined > 0 && row.RSS > 0 {
			row.RSSPerConn = float64(row.RSS-base.rss) / float64(s.Joined)
		}
		if s.Joined > 0 && !s.StartedAt.IsZero() {
			row.CPUPerConnect, row.CPUConnectTooFew = cpuPer(&row, "CPU/connect", srv.cpuBetween(s.StartedAt, s.SendStartedAt), s.Joined)
		}
	}
	var notes []string
	if f := row.Failure(); f != "" {
		notes = append(notes, failedNote(f))
	}
	if g.exitCode > 1 {
		notes = append(notes, fmt.Sprintf("the load generator exited with %d", g.exitCode))
	}
	if row.Errors > 0 {
		notes = append(notes, fmt.Sprintf("%d connection errors (first: %s)", row.Errors, s.FirstError))
	}
	if s.Saturated {
		notes = append(notes, "generator saturated: "+s.SaturationReason)
	}
	if srv == nil {
		notes = append(notes, "no server process to sample (give command or pid)")
	}
	if row.Failure() != "" {
		notes = append(notes, "see runs/"+g.name+".log")
	}
	row.Note = strings.Join(notes, "; ")
	return row
}

// waitReady waits until ready answers 200 (when given) or the URL's port
// accepts connections.
func waitReady(ctx context.Context, p *proc, ready, wsURL string) error {
	if ready != "" {
		return waitHTTP(ctx, p, ready)
	}
	u, err := url.Parse(wsURL)
	if err != nil {
		return fmt.Errorf("url %q: %w", wsURL, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := p.alive(); err != nil {
			return err
		}
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not accept connections on %s within 10 s; see %s", p.name, u.Host, p.log.Name())
}

func writeTargets(dir string, t *results.Targets) error {
	if err := results.WriteTargetsJSON(dir, t); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, results.TargetsCSV))
	if err != nil {
		return err
	}
	if err := results.WriteTargetsCSV(f, t.Rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printTargets(w io.Writer, t *results.Targets) {
	fmt.Fprintf(w, "scalechat bench compare %s; %s; load average before %s, after %s\n", t.Scenario, t.Pinning, t.LoadBefore, t.LoadAfter)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tstep\tclients\tdeliveries/s\tdelivery\tunexpected\tp50\tp99\tmax\tCPU/delivery\tCPU/connect\tRSS/conn\tgenerator\tnote\t")
	for _, r := range t.Rows {
		gen := fmt.Sprintf("%.0f%%", 100*r.GeneratorCPU)
		if r.Saturated {
			gen += " SATURATED"
		}
		p50, p99, hi, cpu, mem := "–", "–", "–", "–", "–"
		if r.Measured() {
			p50, p99, hi = ms(r.P50), ms(r.P99), ms(r.Max)
			if !r.CPUDeliveryTooFew {
				cpu = us(r.CPUPerDelivery)
			}
		}
		if r.MemoryMeasured() {
			mem = kib(r.RSSPerConn)
		}
		connect := perConnect(r.CPUPerConnect)
		if r.CPUConnectTooFew {
			connect = "–"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Target, dash(r.Step), r.Clients, rate(r.PerSecond),
			fmt.Sprintf("%.3f%%", 100*r.Ratio), r.Unexpected, p50, p99, hi, cpu, connect, mem, gen, joinNote(r.Note, r.CPUNote))
	}
	tw.Flush()
	printRatios(w, t.Rows)
	for _, r := range t.Rows {
		if r.Failure() != "" {
			fmt.Fprintf(w, "WARNING: target %s%s: %s\n", r.Target, stepOf(r.Step), r.Note)
		}
	}
}

// stepOf names a row's step in a sentence, or nothing for a failed run.
func stepOf(step string) string {
	if step == "" {
		return ""
	}
	return ", step " + step
}
