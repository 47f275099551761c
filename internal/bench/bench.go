//go:build linux

// Package bench runs scalechat's fixed benchmark scenarios (issue 7): each
// against a freshly started `scalechat serve` child pinned to CPU 0, driven
// by `scalechat loadtest` children pinned to CPU 1, on loopback, every phase
// bounded in time. Server CPU time and RSS come from /proc/<pid>/stat over
// the window in which the generator's traffic flowed (meta.json's
// send_started_at … send_ended_at); the result is one table.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
)

// Options configure a run of the benchmarks.
type Options struct {
	Exe    string    // the scalechat binary started as server and generator
	Dir    string    // folder for logs, CSV and meta.json of every child; empty: a temporary one, removed after
	Smoke  bool      // tiny sizes: proves the command works, says nothing about speed
	Stdout io.Writer // the table
	Stderr io.Writer // progress
}

// Result is one measured line of the bench table: a scenario, or one step
// or setup of it.
type Result struct {
	Scenario   string
	Clients    int
	PerSecond  float64 // deliveries per second while sending
	Ratio      float64 // received ÷ expected; < 0: not applicable
	P50, P99   float64 // ms
	Max        float64 // ms
	ServerCPU  float64 // seconds over the measured window
	CPUPerDel  float64 // µs of server CPU per delivery; 0: not applicable
	RSS        int64   // server bytes, largest in the window
	GenCPU     float64 // seconds, whole generator process(es)
	Saturated  bool
	Figure     string // the scenario's key figure
	Target     string
	Verdict    string // met, MISSED, lower bound, error, or empty (no target)
	Note       string
	deliveries int64
}

// Scenario is one benchmark.
type Scenario struct {
	Name  string
	About string
	run   func(ctx context.Context, r *runner) ([]Result, error)
}

// Scenarios lists the benchmarks in the order a full run takes them.
func Scenarios() []Scenario {
	return []Scenario{
		{"idle", "15,000 idle connections: server RSS growth per connection (≤ 2 KiB)", runIdle},
		{"oneroom", "1 room, N clients, 1 msg/s each: largest N with 100 % delivery and p99 < 100 ms (≥ 800)", runOneRoom},
		{"rooms", "2,500 rooms × 4 clients, 1 msg/s each: 100 %, p99 < 50 ms, ≤ 10 µs CPU per delivery", runRooms},
		{"storm", "15,000 clients connecting at 5,000/s during room traffic: p99s within 2× of calm", runStorm},
		{"topics", "4,000 clients × 50 of 10,000 rooms, 400 send 10/s: 100 %, p99 < 50 ms", runTopics},
		{"cluster", "2 nodes + Redis: cross-node vs local delivery, latency and CPU", runCluster},
		{"overhead", "cost of metrics (server) and of CSV recording (generator), on vs off", runOverhead},
		{"compression", "200 rooms × 10 clients, 1 msg/s, 256 B and 4 KiB: permessage-deflate on vs off, CPU and bytes per delivery", runCompression},
		{"transports", "100 … 1,000 clients send one message each over WebSocket, long polling, polling: errors, p99, CPU, bytes", runTransports},
	}
}

// runner carries what every scenario needs.
type runner struct {
	exe     string
	dir     string
	smoke   bool
	taskset string // path of taskset, empty when missing (no pinning)
	stderr  io.Writer
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// size picks the full or the smoke value.
func (r *runner) size(full, smoke int) int {
	if r.smoke {
		return smoke
	}
	return full
}

func (r *runner) dur(full, smoke time.Duration) time.Duration {
	if r.smoke {
		return smoke
	}
	return full
}

// newRunner finds the binary (default: this one), makes the work folder
// (default: a temporary one, which cleanup removes) and finds taskset.
func newRunner(exe, dir string, smoke bool, stderr io.Writer) (r *runner, cleanup func(), err error) {
	r = &runner{exe: exe, dir: dir, smoke: smoke, stderr: stderr}
	cleanup = func() {}
	if r.exe == "" {
		if r.exe, err = os.Executable(); err != nil {
			return nil, nil, fmt.Errorf("find the scalechat binary: %w", err)
		}
	}
	if r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "scalechat-bench-"); err != nil {
			return nil, nil, fmt.Errorf("create a work folder: %w", err)
		}
		cleanup = func() { os.RemoveAll(r.dir) }
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create the work folder: %w", err)
	}
	if p, err := exec.LookPath("taskset"); err == nil {
		r.taskset = p
	} else {
		r.logf("taskset not found: server and generator are not pinned to cores")
	}
	return r, cleanup, nil
}

// Run runs the named scenarios (all when names is empty) and prints the
// table. It returns an error when a scenario could not run; missed targets
// are results, not errors.
func Run(ctx context.Context, names []string, opt Options) error {
	all := Scenarios()
	var todo []Scenario
	if len(names) == 0 {
		todo = all
	}
	for _, n := range names {
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == n })
		if i < 0 {
			return fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(scenarioNames(all), ", "))
		}
		todo = append(todo, all[i])
	}
	r, cleanup, err := newRunner(opt.Exe, opt.Dir, opt.Smoke, opt.Stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	load := procstat.LoadAvg()
	start := time.Now()
	var rows []Result
	var failed []string
	for _, s := range todo {
		if ctx.Err() != nil {
			break
		}
		r.logf("scenario %s: %s", s.Name, s.About)
		t := time.Now()
		got, err := s.run(ctx, r)
		rows = append(rows, got...)
		if err != nil {
			failed = append(failed, s.Name)
			rows = append(rows, Result{Scenario: s.Name, Ratio: -1, Verdict: "error", Note: err.Error()})
			r.logf("scenario %s failed: %v", s.Name, err)
		}
		r.logf("scenario %s done in %s", s.Name, time.Since(t).Round(time.Second))
	}
	mode := "full"
	if r.smoke {
		mode = "smoke (tiny sizes, figures mean nothing)"
	}
	fmt.Fprintf(opt.Stdout, "scalechat bench, %s; %s; load average before %s, after %s; %s\n",
		mode, pinning(r.taskset != ""), load, procstat.LoadAvg(), time.Since(start).Round(time.Second))
	PrintTable(opt.Stdout, rows)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("scenario(s) %s could not run (see the notes)", strings.Join(failed, ", "))
	}
	return nil
}

func scenarioNames(ss []Scenario) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func pinning(on bool) string {
	if on {
		return "server on CPU " + serverCPU + ", generator on CPU " + generatorCPU
	}
	return "NOT pinned (no taskset)"
}

// PrintTable writes rows as an aligned table, then the notes.
func PrintTable(w io.Writer, rows []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tclients\tdeliv/s\tdelivery\tp50\tp99\tmax\tsrv CPU\tµs/deliv\tsrv RSS\tgen CPU\tgen saturated\tfigure\ttarget\tresult")
	for _, r := range rows {
		sat := "no"
		if r.Saturated {
			sat = "YES"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Scenario, intOrDash(r.Clients), rate(r.PerSecond), ratio(r.Ratio), ms(r.P50), ms(r.P99), ms(r.Max),
			secs(r.ServerCPU), us(r.CPUPerDel), mib(r.RSS), secs(r.GenCPU), sat, dash(r.Figure), dash(r.Target), dash(r.Verdict))
	}
	tw.Flush()
	for _, r := range rows {
		if r.Saturated {
			fmt.Fprintln(w, "  gen saturated YES: the load generator was the bottleneck, so the server's figures on that row are lower bounds.")
			break
		}
	}
	for _, r := range rows {
		if r.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Scenario, r.Note)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func intOrDash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d", n)
}

func rate(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func ratio(v float64) string {
	if v < 0 {
		return "-"
	}
	if v == 1 {
		return "100%"
	}
	return fmt.Sprintf("%.3f%%", 100*v)
}

func ms(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.2fms", v)
}

func secs(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs", v)
}

func us(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
}

func kib(b float64) string { return fmt.Sprintf("%.2f KiB", b/1024) }

// verdict turns a check into the result column: a miss on a saturated
// generator says so, as the server may not be the cause.
func verdict(met, saturated bool) string {
	switch {
	case met && saturated:
		return "met (generator saturated)"
	case met:
		return "met"
	case saturated:
		return "MISSED (generator saturated)"
	}
	return "MISSED"
}
