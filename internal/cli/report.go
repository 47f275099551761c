package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/report"
	"github.com/scalechat/scalechat/internal/results"
)

func newReportCmd() *cobra.Command {
	var (
		af         analyzeFlags
		latencyCap time.Duration
	)
	cmd := &cobra.Command{
		Use:   "report --out DIR INPUT...",
		Short: "Draw the charts and the HTML page of a load test",
		Long: `report writes into --out DIR the charts of a load test, as PNG (1600×900) and SVG, and an
index.html that opens offline (no network) with:

  1. latency percentiles p10 … p99 per step, one panel per step, the y axis cut at
     --latency-cap and marked where cut;
  2. p50/p90/p99 against the step on a log scale;
  3. mean latency ± standard deviation per step;
  4. messages sent and deliveries expected vs received per step;
  5. deliveries per second and p99 over time within each step;
  6. server CPU, memory and processing time over time, when the run scraped server
     metrics (<out>.server.csv);
  7. the summary table, the machine and scenario from <out>.meta.json, and a warning on
     every step whose load generator was saturated.

INPUT is either a folder written by "scalechat analyze --out" or the CSV files of a run,
which are then analysed first (the summary files land in DIR too).

INPUT may also be a transports comparison (scalechat bench transports: its folder holding
transports.csv, or that file): the report then draws, for WebSocket, long polling and
plain polling side by side, errors, server CPU seconds, megabytes on the wire and p99
latency against the number of clients.

INPUT may also be a comparison of servers (scalechat bench compare: its folder holding
targets.json, or that file): the report then draws the targets side by side, latency
percentiles per step, server CPU per delivery, memory per connection and deliveries per
second.

INPUT may also be an audit (scalechat audit --out: its folder holding audit.json, or that
file): the report then shows the verdict per guarantee, the recovery after each fault and
what went wrong, by fault.

INPUT may also be a diff (scalechat diff --out: its folder holding diff.json, or that
file): the report then draws, per metric and step, A's and B's bars with B's confidence
interval, and the table of changes and verdicts.

INPUT may also be a results file of scalechat bench --json holding the scaling scenario
(scalechat bench --json FILE scaling): the report then draws, one curve per server size (1, 2,
4 … event loops), p50 and p99 latency and server CPU per delivery against the deliveries per
second each step carried: the latency–throughput curve to the knee.

INPUT may also be a knee search (scalechat loadtest --find: its <out>.knee.json, or a folder
holding one): the report then draws p50/p99 latency and delivery against the load, the knee
marked, and lists the probes with their SLO verdicts and the first limit.

A run judged with --slo (loadtest's meta.json, or analyze's summary.json) shows its SLOs,
met or missed with the measured value, above the summary; a missed one is also a warning.`,
		Example: `  scalechat report --out report/ results/
  scalechat report --out report/ run-w0.csv.gz run-w1.csv.gz
  scalechat report --out report/ --steps steps.txt
  scalechat report --out report/ results/transports/
  scalechat report --out report/ results/compare/
  scalechat report --out report/ results/audit/
  scalechat report --out report/ results/diff/
  scalechat report --out report/ results/find.knee.json
  scalechat report --out report/ scaling.json   # scalechat bench --json scaling.json scaling`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if af.out == "" {
				return fmt.Errorf("--out DIR is required")
			}
			if latencyCap <= 0 {
				return fmt.Errorf("--latency-cap must be positive")
			}
			if len(args) == 1 {
				df, ok, err := report.LoadDiff(args[0])
				if err != nil {
					return fmt.Errorf("read diff: %w", err)
				}
				if ok {
					return derivedReport(cmd, args[0], af.out, []string{results.DiffJSON},
						func(o report.Options) ([]report.Chart, error) { return report.WriteDiff(df, o) })
				}
				au, ok, err := report.LoadAudit(args[0])
				if err != nil {
					return fmt.Errorf("read audit: %w", err)
				}
				if ok {
					return derivedReport(cmd, args[0], af.out, []string{results.AuditJSON},
						func(o report.Options) ([]report.Chart, error) { return report.WriteAudit(au, o) })
				}
				kn, ok, err := report.LoadKnee(args[0])
				if err != nil {
					return fmt.Errorf("read knee search: %w", err)
				}
				if ok {
					return derivedReport(cmd, args[0], af.out, []string{filepath.Base(kn.Path)},
						func(o report.Options) ([]report.Chart, error) { return report.WriteKnee(kn, o) })
				}
				tg, ok, err := report.LoadTargets(args[0])
				if err != nil {
					return fmt.Errorf("read comparison: %w", err)
				}
				if ok {
					return derivedReport(cmd, args[0], af.out, []string{results.TargetsCSV, results.TargetsJSON},
						func(o report.Options) ([]report.Chart, error) { return report.WriteTargets(tg, o) })
				}
				tin, ok, err := report.LoadTransports(args[0])
				if err != nil {
					return fmt.Errorf("read comparison: %w", err)
				}
				if ok {
					return derivedReport(cmd, args[0], af.out, []string{results.ComparisonCSV, results.ComparisonJSON},
						func(o report.Options) ([]report.Chart, error) { return report.WriteTransports(tin, o) })
				}
				sc, ok, err := report.LoadScaling(args[0])
				if err != nil {
					return fmt.Errorf("read bench results: %w", err)
				}
				if ok {
					return derivedReport(cmd, args[0], af.out, []string{filepath.Base(sc.Path)},
						func(o report.Options) ([]report.Chart, error) { return report.WriteScaling(sc, o) })
				}
			}
			in, err := reportInput(cmd, af, args)
			if err != nil {
				return err
			}
			if in.Summary.ServerMetrics != "" {
				// Keep the server metrics with the report.
				dst := filepath.Join(af.out, report.ServerCSV)
				if err := copyFile(in.Summary.ServerMetrics, dst); err != nil {
					return fmt.Errorf("copy server metrics: %w", err)
				}
			}
			charts, err := report.Write(in, report.Options{Out: af.out, LatencyCap: latencyCap})
			if err != nil {
				return fmt.Errorf("report: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d charts and %s\n", len(charts), filepath.Join(af.out, "index.html"))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&af.out, "out", "", "write the report into this `DIR` (required)")
	fl.DurationVar(&latencyCap, "latency-cap", 2*time.Second, "cut the y axis of the latency percentile panels here")
	fl.StringVar(&af.steps, "steps", "", "CSV input in the older headerless format: a `FILE` of rooms,room_size,path lines")
	fl.StringVar(&af.meta, "meta", "", "the run's meta.json `FILE` for CSV input (default: found beside the inputs)")
	fl.DurationVar(&af.window, "window", 2*time.Minute, "CSV input: how long a message waits for missing deliveries")
	fl.DurationVar(&af.interval, "interval", time.Second, "CSV input: time-series bucket")
	addMaxMalformed(cmd, &af)
	return cmd
}

// derivedReport draws a report of a results folder that is not an analysis
// (a transports or targets comparison, an audit): write draws it into out,
// and the folder's data files are copied beside the charts.
func derivedReport(cmd *cobra.Command, src, out string, files []string, write func(report.Options) ([]report.Chart, error)) error {
	dir := src
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		dir = filepath.Dir(src)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if absPath(dir) != absPath(out) {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				continue
			}
			if err := copyFile(filepath.Join(dir, f), filepath.Join(out, f)); err != nil {
				return fmt.Errorf("copy %s: %w", f, err)
			}
		}
	}
	charts, err := write(report.Options{Out: out})
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %d charts and %s\n", len(charts), filepath.Join(out, "index.html"))
	return nil
}

// reportInput loads an analyze folder, or analyses CSV files into --out.
func reportInput(cmd *cobra.Command, af analyzeFlags, args []string) (*report.Input, error) {
	if len(args) == 1 && af.steps == "" {
		if st, err := os.Stat(args[0]); err == nil && st.IsDir() {
			in, err := report.Load(args[0])
			if err != nil {
				return nil, fmt.Errorf("read analysis: %w", err)
			}
			if abs1, abs2 := absPath(args[0]), absPath(af.out); abs1 != abs2 {
				if err := os.MkdirAll(af.out, 0o755); err != nil {
					return nil, err
				}
				for _, f := range []string{results.SummaryCSV, results.SummaryJSON, results.TimeseriesCSV} {
					if err := copyFile(filepath.Join(args[0], f), filepath.Join(af.out, f)); err != nil {
						return nil, err
					}
				}
			}
			return in, nil
		}
	}
	res, err := runAnalyze(cmd, af, args)
	if err != nil {
		return nil, err
	}
	in := &report.Input{Summary: &res.Summary, Series: res.Series}
	if err := in.LoadServer(); err != nil {
		return nil, err
	}
	return in, nil
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

func copyFile(src, dst string) error {
	if absPath(src) == absPath(dst) {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
