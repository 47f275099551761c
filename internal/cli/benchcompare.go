//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/bench"
	"github.com/scalechat/scalechat/internal/fivefield"
	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
	"github.com/scalechat/scalechat/internal/version"
)

func newBenchCompareCmd() *cobra.Command {
	opt := bench.CompareOptions{}
	var sf sloFlags
	cmd := &cobra.Command{
		Use:   "compare FILE",
		Short: "Run the same steps against several chat servers, one after another, and compare them",
		Long: `compare runs the steps of a scenario file against each server of its targets: list, one
after another on this machine (docs/loadtest.md#comparing-servers-scalechat-bench-compare).
A target has a name, the protocol the load generator speaks to it (scalechat, legacy,
centrifugo, socketio or echo), its URL and either the command that starts it (the bench starts it
pinned to CPU 0, waits until its port accepts connections or its ready URL answers 200,
reads its CPU time and RSS from /proc, and stops it) or the pid of a server already
running. In url, command and ready, {port} is a free port and {scalechat} this binary.
The generator runs pinned to CPU 1.

It prints one table (deliveries/s, delivery ratio, unexpected deliveries, latency p50, p99
and max, server CPU µs per delivery and RSS per connection over each step's sending window,
server CPU µs per connection accepted from the step's start to its first send, generator
CPU and saturation), then every target's costs over the first target's per step, and
writes targets.csv, targets.json and every run's files into --out; "scalechat report --out DIR OUT" draws the targets side by side.

A file without targets: runs against this binary's scalechat serve (defaults, a free port).

--slo judges every step of every target against objectives (steps named TARGET/STEP, so
"ours/s2:p99<50ms" names one; latency, delivery, errors, unexpected and cpu_per_delivery from
the bench's /proc figures): the verdicts are printed, recorded in targets.json ("slo", which
the report shows) and, with --junit, written as a JUnit testsuite per target; exit code 3
when one is missed, 4 when one is inconclusive. Without --slo, the file's own objectives
(slo: in the file, the same syntax) judge it.`,
		Example: `  scalechat bench compare --out results/compare scenarios/compare.yaml
  scalechat report --out report/ results/compare`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if opt.Out == "" {
				return &exitError{code: exitUsage, err: errors.New("--out DIR is required")}
			}
			opt.File = args[0]
			return runCompare(c, opt, &sf)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Out, "out", "", "results `DIR`: targets.csv, targets.json and runs/ (required)")
	f.BoolVar(&opt.Smoke, "smoke", false, "every step shrunk to at most 3 rooms of 4 clients for 1 s, no pause between: checks the setup, measures nothing")
	sf.define(f)
	return cmd
}

// runCompare runs the scenario file opt.File against its targets (this
// binary's serve when it names none) and judges it against --slo, or
// without --slo against the file's own objectives (slo:).
func runCompare(c *cobra.Command, opt bench.CompareOptions, sf *sloFlags) error {
	if f := c.Flags().Lookup("slo"); f == nil || !f.Changed {
		sc, err := loadtest.LoadScenario(opt.File, loadtest.DefaultStep())
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		sf.exprs = sc.SLO
		if opt.Smoke && len(sc.SLO) > 0 {
			// A smoke run measures nothing: its figures would judge nothing.
			fmt.Fprintf(c.ErrOrStderr(), "scalechat bench: --smoke: the objectives of %s are not judged\n", opt.File)
			sf.exprs = nil
		}
	}
	if err := sf.parse(); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	opt.Args, opt.Version = os.Args[1:], version.Version()
	opt.Stdout, opt.Stderr = c.OutOrStdout(), c.ErrOrStderr()
	err := bench.RunCompare(c.Context(), opt)
	if err != nil || len(sf.objs) == 0 {
		return err
	}
	judged := judgeTargets(c.OutOrStdout(), opt.Out, sf)
	if opt.JSON != "" {
		if err := addVerdicts(opt.JSON, opt.Out); err != nil {
			return &exitError{code: exitFailed, err: err}
		}
	}
	return judged
}

// addVerdicts writes the objectives judged on each step of the comparison
// in out (targets.json's "slo") beside that step's row of the results file
// path: the objectives as its target, the worst verdict as its result.
func addVerdicts(path, out string) error {
	tg, err := results.ReadTargets(filepath.Join(out, results.TargetsJSON))
	if err != nil {
		return fmt.Errorf("read the comparison: %w", err)
	}
	f, err := results.ReadBenchFile(path)
	if err != nil {
		return err
	}
	for i := range f.Rows {
		row := &f.Rows[i]
		var mine []slo.Result
		var objs []string
		for _, r := range tg.SLO {
			if strings.HasSuffix(row.Scenario, " "+r.Step) {
				mine, objs = append(mine, r), append(objs, r.SLO)
			}
		}
		if len(mine) > 0 {
			row.Target, row.Verdict = strings.Join(objs, ", "), string(slo.Worst(mine))
		}
	}
	return results.WriteBenchFile(path, f)
}

// judgeTargets judges every step of every target of the comparison in out
// against the objectives (steps named TARGET/STEP, so "ours/s2:p99<50ms"
// names one), prints the verdicts, writes a JUnit testsuite per target and
// returns the exit code's error.
func judgeTargets(w io.Writer, out string, sf *sloFlags) error {
	tg, err := results.ReadTargets(filepath.Join(out, results.TargetsJSON))
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("read the comparison: %w", err)}
	}
	steps := make([]slo.Step, len(tg.Rows))
	names := make([]string, len(tg.Rows))
	for i, r := range tg.Rows {
		steps[i] = slo.FromTarget(r)
		names[i] = steps[i].Name
	}
	if err := sf.checkSteps(names, false); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	rs := slo.Evaluate(sf.objs, steps)
	slo.Print(w, rs)
	// Recorded beside the rows, for the report's page.
	tg.SLO = rs
	if err := results.WriteTargetsJSON(out, tg); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("record the SLOs: %w", err)}
	}
	var suites []slo.Suite
	for _, t := range tg.Targets {
		var mine []slo.Result
		for _, r := range rs {
			if strings.HasPrefix(r.Step, t+"/") {
				mine = append(mine, r)
			}
		}
		suites = append(suites, suiteFor("bench compare "+t, tg.StartedAt, tg.EndedAt, mine))
	}
	if err := sf.writeJUnit(suites); err != nil {
		return err
	}
	return sf.exitFor(rs, nil)
}

// newFiveFieldCmd serves the five-field reference server, a target of the
// example comparison (scenarios/compare.yaml).
func newFiveFieldCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:    "five-field-server",
		Short:  "Serve the original five-field chat protocol (a goroutine per connection), for comparisons",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			s := fivefield.New()
			srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			fmt.Fprintf(c.ErrOrStderr(), "five-field server on %s\n", ln.Addr())
			select {
			case err := <-served:
				return err
			case <-c.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx) // hijacked WebSockets are not its: Close ends them
			s.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:9000", "listen `ADDR`")
	return cmd
}
