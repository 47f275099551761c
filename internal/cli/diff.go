package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/diff"
	"github.com/scalechat/scalechat/internal/results"
)

type diffFlags struct {
	failOn    string
	jsonPath  string
	out       string
	resamples int
	seed      uint64
	window    time.Duration
}

func newDiffCmd() *cobra.Command {
	var f diffFlags
	cmd := &cobra.Command{
		Use:   "diff [flags] A B | A1 A2 ... -- B1 B2 ...",
		Short: "Did this change make it slower? Compare two runs with confidence intervals and a verdict",
		Long: `diff compares load-test run A (the baseline) with run B, step by step (steps matched by
name), and prints for each step p50, p90, p99 and p99.9 of the delivery latency, the
delivery ratio and, when both runs scraped the server (loadtest --server-metrics), server
CPU per delivery: A's and B's figure, the change (% for latencies and CPU, percentage
points for delivery), its 95 % confidence interval and a verdict: regressed, improved or
same.

A run is the CSV file a loadtest wrote (--out, .csv or .csv.gz; its meta.json and server
CSV are found beside it), its meta.json, or a folder written by "analyze --out" whose CSV
files still exist: the interval needs the events. Give several runs per side with "--"
between the sides: A1 A2 A3 -- B1 B2 B3.

The interval is a bootstrap: 1000 resamples (seed fixed, so the output is the same every
time) that draw, per side, runs with replacement and then each drawn run's 1 s windows
(--window) with replacement. The run-to-run spread thus widens the interval when a side
has several runs; with one run per side only the spread within each run is known, so on
a noisy machine give several.

A metric regressed when its whole interval lies beyond its threshold on the side where it
gets worse, improved when its whole interval lies beyond it on the other side, and is the
same otherwise (within the noise, or too small to matter). Thresholds: those of
--fail-on, by default 10 % for latencies and CPU and 0 pp for delivery. A step with no
delivery shows – for its latencies, never 0; B delivering nothing where A delivered is a
regression. Steps found on one side only are listed and not compared.

--fail-on makes diff a gate for CI: "p99:+10%,delivery:-0.1pp" fails when p99 rose by
more than 10 % or the delivery ratio fell by more than 0.1 percentage points, in any
step, with the whole interval beyond. Metrics: p50, p90, p99, p99.9 and cpu take a
positive %, delivery a negative pp. Only the gated metrics then decide the verdict.

Exit status: 0 when the runs were compared (and the gate, if any, passed); 3 when a gated
metric regressed; 1 when a run could not be read or a gated metric could not be compared
(a side delivered nothing, no server metrics for cpu); 2 for bad arguments.

--json FILE (or --out DIR, which writes DIR/diff.json) keeps the diff; "scalechat report
--out REPORT DIR" draws it: per step, A's and B's bars with B's interval.`,
		Example: `  scalechat diff results/before.csv.gz results/after.csv.gz
  scalechat diff --fail-on 'p99:+10%,delivery:-0.1pp' before.csv after.csv
  scalechat diff --out results/diff a1.csv a2.csv a3.csv -- b1.csv b2.csv b3.csv`,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, b, err := diffSides(args, cmd.ArgsLenAtDash())
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			gate, err := diff.ParseGate(f.failOn)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if f.resamples < 100 || f.window <= 0 {
				return &exitError{code: exitUsage, err: errors.New("--resamples must be at least 100 and --window positive")}
			}
			return runDiff(cmd, f, gate, a, b)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.failOn, "fail-on", "", "gate: comma-separated `metric:threshold`, e.g. 'p99:+10%,delivery:-0.1pp'; exit 3 when one regressed")
	fl.StringVar(&f.jsonPath, "json", "", "write the diff as JSON to this `FILE`")
	fl.StringVar(&f.out, "out", "", "write the diff as "+results.DiffJSON+" into this `DIR` (for scalechat report)")
	fl.IntVar(&f.resamples, "resamples", 1000, "bootstrap resamples")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the resampling")
	fl.DurationVar(&f.window, "window", time.Second, "the windows the bootstrap draws")
	return cmd
}

// diffSides splits the arguments into the runs of A and of B: "A B", or
// the runs of A, "--", the runs of B (dash is where "--" was, -1 if not).
func diffSides(args []string, dash int) (a, b []string, err error) {
	switch {
	case dash >= 0 && (dash == 0 || dash == len(args)):
		return nil, nil, errors.New("give at least one run on each side of --")
	case dash >= 0:
		return args[:dash], args[dash:], nil
	case len(args) != 2:
		return nil, nil, fmt.Errorf("give two runs, A and B, or several per side with -- between them (got %d arguments)", len(args))
	}
	return args[:1], args[1:], nil
}

func runDiff(cmd *cobra.Command, f diffFlags, gate diff.Gate, a, b []string) error {
	load := func(paths []string) ([]*diff.Run, error) {
		var runs []*diff.Run
		for _, p := range paths {
			r, err := diff.Load(cmd.Context(), p, f.window)
			if err != nil {
				return nil, &exitError{code: exitFailed, err: fmt.Errorf("read run: %w", err)}
			}
			runs = append(runs, r)
		}
		return runs, nil
	}
	ra, err := load(a)
	if err != nil {
		return err
	}
	rb, err := load(b)
	if err != nil {
		return err
	}
	d := diff.Compare(ra, rb, diff.Options{Resamples: f.resamples, Seed: f.seed, Gate: gate})
	if err := diff.WriteText(cmd.OutOrStdout(), d); err != nil {
		return err
	}
	for _, p := range []string{f.jsonPath, outFile(f.out)} {
		if p == "" {
			continue
		}
		if err := results.WriteDiff(p, d); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("write diff: %w", err)}
		}
	}
	if len(gate) == 0 {
		if len(d.Steps) == 0 {
			return &exitError{code: exitFailed, err: errors.New("no step is in both A and B: nothing was compared")}
		}
		return nil
	}
	if len(d.Steps) == 0 {
		return &exitError{code: exitFailed, err: errors.New("the gate could not be checked: no step is in both A and B")}
	}
	if d.Verdict == results.Regressed {
		return &exitError{code: exitMissed, err: fmt.Errorf("run B regressed beyond --fail-on %s: %s", d.Gate, strings.Join(d.Reasons, "; "))}
	}
	if u := diff.Uncompared(d); len(u) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("the gate could not be checked: %s", strings.Join(u, "; "))}
	}
	return nil
}

func outFile(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, results.DiffJSON)
}
