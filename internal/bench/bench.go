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
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
)

// Options configure a run of the benchmarks.
type Options struct {
	Exe    string // the scalechat binary started as server and generator
	Dir    string // folder for logs, CSV and meta.json of every child; empty: a temporary one, removed after
	Smoke  bool   // tiny sizes: proves the command works, says nothing about speed
	Repeat int    // runs of the named scenarios, in turn (a b a b …); 0 or 1: one
	JSON   string // also write the rows as results.BenchFile to this path (scalechat plan --from)
	// Command is the command line that measures it again, recorded in the
	// JSON file.
	Command string
	// ServerCPUs and GeneratorCPUs are CPU lists (taskset -c's form, e.g.
	// "0-7") for the server side and the generators; empty: the first CPU
	// and the second on a machine of two, the lower and upper half on
	// more.
	ServerCPUs, GeneratorCPUs string
	// ScalingRoomSize is the members of the rooms of the benchmarks that
	// take it (scaling; bench: vary: room_size); 0: the file's own.
	ScalingRoomSize int
	// RedisLinger, when not 0, is every cluster node's --redis-linger
	// (the cluster scenario): what a longer round saves and costs.
	RedisLinger time.Duration
	// Files are benchmark files (scenario files with a bench: section) to
	// run after the named scenarios.
	Files []string
	// FailOnMiss makes Run return ErrMissed when a row missed its
	// objectives (scalechat bench FILE.yaml's exit code 3).
	FailOnMiss bool
	Stdout     io.Writer // the table
	Stderr     io.Writer // progress
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
	CPUPerDel  float64 // µs of server CPU per delivery; 0: not applicable, or CPUNote
	CPUNote    string  // why CPUPerDel is 0 though measured: too few clock ticks (results.CPUTooFew)
	RSS        int64   // server bytes, largest in the window
	GenCPU     float64 // seconds, whole generator process(es)
	Saturated  bool
	Figure     string // the scenario's key figure
	Target     string
	Verdict    string // met, MISSED, lower bound, error, or empty (no target)
	Note       string
	Loops      int // the server's event loops, on the rows of the scaling scenario's steps
	deliveries int64
	cluster    *clusterFig // a cluster's figures, for the results file
	// step and figs are the benchmark file's step this row is of and its
	// figures, for the medians of --repeat.
	step string
	figs map[string]float64
}

// Scenario is one benchmark.
type Scenario struct {
	Name  string
	About string
	// File is the benchmark file it runs (scenarios/NAME.yaml, embedded).
	File string
	run  func(ctx context.Context, r *runner) ([]Result, error)
	// medians, when set, summarises the rows of several runs (--repeat).
	medians func(runs [][]Result) []Result
}

// Scenarios lists the benchmarks in the order a full run takes them: the
// benchmark files of scenarios/ (embedded), by file name. An embedded
// file that does not parse is left out here, and Run says why.
func Scenarios() []Scenario {
	all, _ := allScenarios()
	return all
}

// runner carries what every scenario needs.
type runner struct {
	exe     string
	dir     string
	smoke   bool
	taskset string // path of taskset, empty when missing (no pinning)
	// srvCPUs and genCPUs are the CPUs the server side (servers, Redis)
	// and the load generators are pinned to; a server's event loops
	// follow its CPUs (serve's --loops defaults to GOMAXPROCS, which Go
	// takes from the affinity).
	srvCPUs, genCPUs []int
	stderr           io.Writer
	linger           time.Duration // the cluster nodes' --redis-linger; 0: theirs by default
	// roomSize is the members of the rooms of the benchmarks that take
	// it (bench: vary: room_size); 0: the file's own.
	roomSize int
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
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
	if err := r.setCPUs("", ""); err != nil {
		cleanup()
		return nil, nil, err
	}
	raiseFileLimit()
	return r, cleanup, nil
}

// setCPUs pins the server side to the CPU list server and the generators
// to generator; an empty list takes its side of the default split (see
// splitCPUs).
func (r *runner) setCPUs(server, generator string) error {
	srv, gen, err := pickCPUs(server, generator)
	if err != nil {
		return err
	}
	r.srvCPUs, r.genCPUs = srv, gen
	return nil
}

// serverList is the server side's CPUs as taskset -c takes them.
func (r *runner) serverList() string { return formatCPUList(r.srvCPUs) }

// generatorList is the generators' CPUs as taskset -c takes them.
func (r *runner) generatorList() string { return formatCPUList(r.genCPUs) }

// Run runs the named scenarios (all when names is empty) and prints the
// table. It returns an error when a scenario could not run; missed targets
// are results, not errors.
func Run(ctx context.Context, names []string, opt Options) error {
	all, err := allScenarios()
	if err != nil {
		return err
	}
	var todo []Scenario
	if len(names) == 0 && len(opt.Files) == 0 {
		todo = all
	}
	for _, f := range opt.Files {
		sp, err := loadSpecFile(f)
		if err != nil {
			return err
		}
		todo = append(todo, specScenario(sp))
	}
	for _, n := range names {
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == n })
		if i < 0 {
			return fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(scenarioNames(all), ", "))
		}
		todo = append(todo, all[i])
	}
	if opt.Repeat < 0 {
		return fmt.Errorf("--repeat must be at least 1, not %d", opt.Repeat)
	}
	repeat := max(opt.Repeat, 1)
	r, cleanup, err := newRunner(opt.Exe, opt.Dir, opt.Smoke, opt.Stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	r.linger = opt.RedisLinger
	if opt.ScalingRoomSize < 0 {
		return fmt.Errorf("--scaling-room-size must be at least 1, not %d", opt.ScalingRoomSize)
	}
	r.roomSize = opt.ScalingRoomSize
	if err := r.setCPUs(opt.ServerCPUs, opt.GeneratorCPUs); err != nil {
		return err
	}
	load := procstat.LoadAvg()
	start := time.Now()
	rows, failed, err := r.runAll(ctx, todo, repeat)
	if err != nil {
		return err
	}
	mode := "full"
	if r.smoke {
		mode = "smoke (tiny sizes, figures mean nothing)"
	}
	if repeat > 1 {
		mode += fmt.Sprintf(", %d runs in turn", repeat)
	}
	if r.linger != 0 {
		mode += fmt.Sprintf(", cluster nodes with --redis-linger %s", r.linger)
	}
	fmt.Fprintf(opt.Stdout, "scalechat bench, %s; %s; load average before %s, after %s; %s\n",
		mode, r.pinning(), load, procstat.LoadAvg(), time.Since(start).Round(time.Second))
	PrintTable(opt.Stdout, rows)
	if opt.JSON != "" {
		if err := r.writeResults(opt.JSON, rows, start, opt.Command, load); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("scenario(s) %s could not run (see the notes)", strings.Join(failed, ", "))
	}
	if opt.FailOnMiss && !r.smoke && slices.ContainsFunc(rows, func(r Result) bool { return strings.HasPrefix(r.Verdict, "MISSED") }) {
		return ErrMissed
	}
	return nil
}

// ErrMissed is Run's error when a row missed its objectives and
// Options.FailOnMiss asked to hear it.
var ErrMissed = errors.New("a target was missed (see the table)")

// runAll runs the scenarios repeat times in turn (a b … a b …), so that
// each run of a scenario meets the machine's load at a different moment;
// with several runs, a row's name says its run, every run's files go to
// their own folder (run1, run2 …), and the scenarios that can add the
// medians of their figures.
func (r *runner) runAll(ctx context.Context, todo []Scenario, repeat int) (rows []Result, failed []string, err error) {
	runs := map[string][][]Result{}
	dir := r.dir
	for run := 1; run <= repeat; run++ {
		label := ""
		if repeat > 1 {
			label = fmt.Sprintf("#%d ", run)
			r.dir = filepath.Join(dir, fmt.Sprintf("run%d", run))
			if err := os.MkdirAll(r.dir, 0o755); err != nil {
				return rows, failed, fmt.Errorf("create the work folder: %w", err)
			}
		}
		for _, s := range todo {
			if ctx.Err() != nil {
				break
			}
			r.logf("scenario %s%s: %s", label, s.Name, s.About)
			t := time.Now()
			got, err := s.run(ctx, r)
			runs[s.Name] = append(runs[s.Name], got)
			for _, row := range got {
				row.Scenario = label + row.Scenario
				rows = append(rows, row)
			}
			if err != nil {
				failed = append(failed, label+s.Name)
				rows = append(rows, Result{Scenario: label + s.Name, Ratio: -1, Verdict: "error", Note: err.Error()})
				r.logf("scenario %s%s failed: %v", label, s.Name, err)
			}
			r.logf("scenario %s%s done in %s", label, s.Name, time.Since(t).Round(time.Second))
		}
	}
	r.dir = dir
	for _, s := range todo {
		if s.medians != nil && len(runs[s.Name]) > 1 {
			rows = append(rows, s.medians(runs[s.Name])...)
		}
	}
	return rows, failed, nil
}

func scenarioNames(ss []Scenario) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// pinning says where the server side and the generators run.
func (r *runner) pinning() string {
	if r.taskset == "" {
		return "NOT pinned (no taskset)"
	}
	s := fmt.Sprintf("server on CPU %s, generator on CPU %s", r.serverList(), r.generatorList())
	if len(r.srvCPUs) > 1 {
		s += fmt.Sprintf(" (%d event loops)", len(r.srvCPUs))
	}
	for _, c := range r.srvCPUs {
		if slices.Contains(r.genCPUs, c) {
			return s + ", SHARING CPUs: each one's figures include the other's load"
		}
	}
	return s
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
			secs(r.ServerCPU), usOrShort(r), mib(r.RSS), secs(r.GenCPU), sat, dash(r.Figure), dash(r.Target), dash(r.Verdict))
	}
	tw.Flush()
	for _, r := range rows {
		if r.Saturated {
			fmt.Fprintln(w, "  gen saturated YES: the load generator was the bottleneck, so the server's figures on that row are lower bounds.")
			break
		}
	}
	for _, r := range rows {
		if note := joinNote(r.Note, r.CPUNote); note != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Scenario, note)
		}
	}
}

// usOrShort formats a row's µs of server CPU per delivery: "–" when its CPU
// held too few clock ticks to be read (the row's note says so).
func usOrShort(r Result) string {
	if r.CPUNote != "" {
		return "–"
	}
	return us(r.CPUPerDel)
}

// perDelFigure is a row's CPU per delivery as its figure column says it.
func perDelFigure(r Result) string {
	if r.CPUNote != "" {
		return "– µs/deliv"
	}
	return fmt.Sprintf("%.2f µs/deliv", r.CPUPerDel)
}

// perDelivery returns cpu in µs per delivery, or 0 and the reason when cpu
// holds too few clock ticks to be read to 10 %.
func perDelivery(cpu time.Duration, deliveries int64) (float64, string) {
	switch {
	case deliveries <= 0:
		return 0, ""
	case !results.CPUReadable(cpu):
		return 0, results.CPUTooFew("CPU/delivery", cpu)
	}
	return float64(cpu.Nanoseconds()) / 1e3 / float64(deliveries), ""
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
