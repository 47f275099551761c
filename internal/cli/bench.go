//go:build linux

package cli

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/scalechat/scalechat/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var opt bench.Options
	long := `bench runs scalechat's fixed benchmark scenarios, each against a freshly started
server (scalechat serve, pinned with taskset to --server-cpus: CPU 0 on a machine of 2 cores,
the lower half of the CPUs on more, one event loop per CPU) driven by scalechat loadtest
processes (pinned to --generator-cpus: CPU 1, or the upper half), on loopback, every phase
bounded in time, and prints one table: deliveries/s, delivery ratio, latency p50/p99/max,
server CPU seconds and µs per delivery (from /proc over the window the traffic flowed),
server RSS, generator CPU, whether the generator saturated (then the server's figure is a
lower bound), and each target met or missed. --json FILE also writes every row with the
machine (CPU model, cores, memory, kernel, OS, open-file limit), the build and the command:
scalechat plan --from and scalechat bench page read it. The bench raises its soft open-file
limit to the hard one, which the servers it starts inherit. Results and targets: docs/benchmarks.md (made by scalechat bench page
from benchmarks/results); their history: docs/benchmarks-log.md.

Scenarios (all by default, in this order):
`
	var files []string
	for _, s := range bench.Scenarios() {
		long += fmt.Sprintf("  %-16s %s\n", s.Name, s.About)
		files = append(files, path.Base(s.File))
	}
	long += fmt.Sprintf("\nEvery scenario is a file in scenarios/ (embedded): %s.\n", strings.Join(files, ", "))
	long += `
--smoke runs every scenario at tiny sizes in a few seconds each: it proves the command
works and says nothing about speed. The exit code is 1 when a scenario could not run;
missed targets are results, shown in the table.

A scenario file with a bench: section (the servers to start, how to name, show and sum up
its rows) is a benchmark: scalechat bench FILE.yaml runs yours as the named ones run, one
table, every step judged against the file's objectives (slo:), exit code 3 when one is
missed (not with --smoke). Adding a benchmark is one such file (docs/benchmarks.md shows
one, docs/loadtest.md describes the format); put it in scenarios/ to make it a named one.

A scenario file without a bench: section (scalechat loadtest's steps with the objectives
under slo: and, optionally, the servers to start under targets:) runs alone: its steps
against each target (this binary's scalechat serve when it names none), judged against its
objectives (exit code 3 when one is missed, 4 when inconclusive; not judged with --smoke).
Its results go to --dir (targets.json, which scalechat report draws) and, with --json, to a
results file like the named scenarios' (a row per target and step, its objectives and
verdict beside it).

--repeat N runs the named scenarios N times in turn (a b … a b …), since one run on a
shared machine is noisy; rows are numbered #1, #2 …, each run keeps its files in its own
folder (run1, run2 … under --dir), and each benchmark file adds rows with the medians of
its figures over the runs (cluster: its node and Redis ratios).

"scalechat bench transports" runs the transports scenario alone, with flags for its sizes,
and keeps its results folder for scalechat report. "scalechat bench analyze" times the
analyzer against a pandas baseline; "scalechat bench generator" measures the load
generator itself; "scalechat bench page" makes docs/benchmarks.md from results files.`
	cmd := &cobra.Command{
		Use:   "bench [scenario... | FILE.yaml]",
		Short: "Run the fixed benchmark scenarios and print one table of results",
		Long:  long,
		Example: `  scalechat bench                 # everything, about 10 minutes on 2 cores
  scalechat bench idle oneroom    # two scenarios
  scalechat bench --smoke         # tiny sizes, as CI runs it
  scalechat bench --server-cpus 0-3 --generator-cpus 4-7 rooms   # a server of 4 event loops
  scalechat bench --repeat 3 cluster   # the cluster table 3 times in turn, with medians
  scalechat bench --redis-linger 2ms cluster   # the same with longer rounds to Redis
  scalechat bench --json bench.json idle rooms oneroom compression cluster transports   # then: scalechat plan --from bench.json
  scalechat bench mine.yaml       # a benchmark of your own, in one file (docs/loadtest.md)
  scalechat bench transports --from 100 --to 500   # one scenario with its own flags`,
		RunE: func(c *cobra.Command, args []string) error {
			if opt.Repeat < 1 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--repeat must be at least 1, not %d", opt.Repeat)}
			}
			if slices.ContainsFunc(args, isScenarioFile) {
				return runBenchFile(c, args, opt)
			}
			opt.Stdout, opt.Stderr = c.OutOrStdout(), c.ErrOrStderr()
			opt.Command = commandLine(c, args)
			return bench.Run(c.Context(), args, opt)
		},
	}
	cmd.AddCommand(newBenchTransportsCmd(), newBenchAnalyzeCmd(), newBenchGeneratorCmd(), newBenchCompareCmd(), newFiveFieldCmd(), newBenchPageCmd())
	f := cmd.Flags()
	f.BoolVar(&opt.Smoke, "smoke", false, "tiny sizes, a few seconds per scenario (checks the command works, not speed)")
	f.IntVar(&opt.Repeat, "repeat", 1, "run the named scenarios this many times in turn (a b a b …); benchmark files add the medians")
	f.StringVar(&opt.JSON, "json", "", "also write every row and the machine, as JSON, to this file (read by scalechat plan --from and scalechat bench page)")
	f.DurationVar(&opt.RedisLinger, "redis-linger", 0, "start the cluster scenarios' nodes (cluster, and files with nodes) with this --redis-linger (default: serve's own, 250µs; a file's own flags win)")
	f.StringVar(&opt.Dir, "dir", "", "keep every child's log, CSV and meta.json in this folder (default: a temporary folder, removed)")
	f.StringVar(&opt.ServerCPUs, "server-cpus", "", "CPU list for the servers and Redis, e.g. 0-7; one event loop per CPU (default: CPU 0 on 2 cores, the lower half on more)")
	f.IntVar(&opt.ScalingRoomSize, "scaling-room-size", 0, "members of the scaling scenario's rooms (default 50), and of any benchmark file with vary: room_size; a loop starts at 10k deliveries/s, or one full room (size²) when more")
	f.StringVar(&opt.GeneratorCPUs, "generator-cpus", "", "CPU list for the load generators, e.g. 8-15 (default: CPU 1 on 2 cores, the upper half on more)")
	return cmd
}

// isScenarioFile tells a scenario file (FILE.yaml) from a scenario's name.
func isScenarioFile(arg string) bool {
	return strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")
}

// runBenchFile runs one scenario file: its steps against its targets (this
// binary's serve when it names none), judged against its objectives, as
// scalechat bench compare does, its results in --dir (default: a
// temporary folder, removed).
func runBenchFile(c *cobra.Command, args []string, opt bench.Options) error {
	if len(args) != 1 {
		return &exitError{code: exitUsage, err: fmt.Errorf("a scenario file runs alone, not with %d other scenario(s)", len(args)-1)}
	}
	spec, err := bench.IsSpec(args[0])
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if !spec && (opt.Repeat > 1 || opt.RedisLinger != 0 || opt.ScalingRoomSize != 0) {
		return &exitError{code: exitUsage, err: errors.New("--repeat, --redis-linger and --scaling-room-size are for the named scenarios and benchmark files (bench:), not a scenario file")}
	}
	if spec {
		// A benchmark file runs as the named scenarios do, its objectives
		// the exit code.
		opt.Files, opt.FailOnMiss = args, true
		opt.Stdout, opt.Stderr = c.OutOrStdout(), c.ErrOrStderr()
		opt.Command = commandLine(c, args)
		err := bench.Run(c.Context(), nil, opt)
		if errors.Is(err, bench.ErrMissed) {
			return &exitError{code: exitMissed, err: err}
		}
		return err
	}
	out := opt.Dir
	if out == "" {
		tmp, err := os.MkdirTemp("", "scalechat-bench-")
		if err != nil {
			return fmt.Errorf("create a work folder: %w", err)
		}
		defer os.RemoveAll(tmp)
		out = tmp
	}
	var sf sloFlags
	sf.inconclusive = "fail"
	return runCompare(c, bench.CompareOptions{File: args[0], Out: out, Smoke: opt.Smoke, Exe: opt.Exe,
		ServerCPUs: opt.ServerCPUs, GeneratorCPUs: opt.GeneratorCPUs, JSON: opt.JSON, Command: commandLine(c, args)}, &sf)
}

// commandLine is the command as given: its path, the flags set and the
// arguments, which a results file records so that a reader can run it
// again.
func commandLine(c *cobra.Command, args []string) string {
	parts := []string{c.CommandPath()}
	c.Flags().Visit(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			parts = append(parts, "--"+f.Name)
			return
		}
		parts = append(parts, "--"+f.Name, f.Value.String())
	})
	return strings.Join(append(parts, args...), " ")
}

func newBenchAnalyzeCmd() *cobra.Command {
	opt := bench.DefaultAnalyzeOptions()
	size := "1GB"
	cmd := &cobra.Command{
		Use:   "analyze",
		Short: "Time scalechat analyze against a pandas baseline on a generated CSV file",
		Long: `analyze generates a realistic events CSV once (several steps of growing load, rooms of
many sizes, interleaved Joined, Sent and Received rows, log-normal latencies, a little
loss), then times scalechat analyze (--runs times, as a child process) and a plain pandas
script doing the same join (--pandas-runs times) on it, side by side, and prints MB/s,
CPU seconds and the ratio of the medians. It then checks that both found the same counts
per step and percentiles within 1 %. The pandas script ships inside the binary; it needs
python3 with pandas (pip install pandas).

--format legacy does the same on the older headerless format as the original load-test
client wrote it (UUID sender and client ids, one file per step, read with --steps).`,
		Example: `  scalechat bench analyze                          # 1 GB, 3 runs, 1 of pandas
  scalechat bench analyze --size 100MB --runs 5
  scalechat bench analyze --pandas-runs 0           # scalechat analyze alone
  scalechat bench analyze --format legacy           # UUID ids, one file per step`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			n, err := bench.ParseSize(size)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			opt.Size, opt.Stdout = n, c.OutOrStdout()
			return bench.RunAnalyze(c.Context(), opt)
		},
	}
	f := cmd.Flags()
	f.StringVar(&size, "size", size, "size of the generated CSV (e.g. 100MB, 1GB)")
	f.StringVar(&opt.File, "file", "", "CSV file to use or create (default: $TMPDIR/scalechat-bench-analyze-SIZE.csv; with --format legacy the steps file $TMPDIR/scalechat-bench-analyze-legacy-SIZE/steps.txt)")
	f.StringVar(&opt.Format, "format", opt.Format, "CSV format: scalechat, or legacy (headerless, UUID ids, one file per step)")
	f.IntVar(&opt.Runs, "runs", opt.Runs, "runs of scalechat analyze (the median is reported)")
	f.IntVar(&opt.PandasRuns, "pandas-runs", opt.PandasRuns, "runs of the pandas baseline (0: skip it)")
	f.StringVar(&opt.Python, "python", opt.Python, "Python interpreter with pandas installed")
	return cmd
}

func newBenchGeneratorCmd() *cobra.Command {
	opt := bench.DefaultGeneratorOptions()
	cmd := &cobra.Command{
		Use:   "generator",
		Short: "Measure the load generator itself: receive rate per core, memory per idle client",
		Long: `generator measures scalechat loadtest, not a chat server. (a) A blaster process pinned to
CPU 0 pushes pre-encoded chat frames, shaped like the server's, to a few connections as fast
as the sockets take them; the generator, pinned to CPU 1 with GOMAXPROCS=1, parses and
records every one: messages per second and CPU per message with the CSV not written,
plain and gzipped. (b) A minimal server accepts --idle connections that one generator
process holds: its RSS growth per connection. Needs taskset.`,
		Example: `  scalechat bench generator              # both
  scalechat bench generator --only recv  # receive + record throughput only`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opt.Stdout = c.OutOrStdout()
			return bench.RunGenerator(c.Context(), opt)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Only, "only", "", "run only recv or idle")
	f.IntVar(&opt.Conns, "conns", opt.Conns, "recv: connections the blaster feeds")
	f.DurationVar(&opt.Duration, "duration", opt.Duration, "recv: how long each measurement receives")
	f.IntVar(&opt.Idle, "idle", opt.Idle, "idle: connections to hold")
	// The processes of the benchmark: this binary started again.
	f.StringVar(&opt.Role, "role", "", "internal: blaster, idleserver, recv or idle")
	f.StringVar(&opt.Addr, "addr", "", "internal: the server's address")
	f.StringVar(&opt.Record, "record", opt.Record, "internal: plain, gz or none")
	for _, name := range []string{"role", "addr", "record"} {
		_ = f.MarkHidden(name)
	}
	return cmd
}
