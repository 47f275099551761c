package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/analyze"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
)

type analyzeFlags struct {
	out      string
	steps    string
	meta     string
	window   time.Duration
	interval time.Duration
	workers  int
	top      int
	// maxMalformed is the fraction of malformed rows tolerated.
	maxMalformed float64
	// slo judges the steps (analyze only; report reads what analyze wrote).
	slo sloFlags
}

func newAnalyzeCmd() *cobra.Command {
	var f analyzeFlags
	cmd := &cobra.Command{
		Use:   "analyze [flags] FILE...",
		Short: "Turn load-test CSV files into per-step delivery counts and latency percentiles",
		Long: `analyze reads the CSV files of a load test (docs/csv.md) and prints, per step and overall:
clients, rooms, messages sent, expected deliveries, received, lost, delivery ratio, orphans
(Received rows without their Sent row) and per-delivery latency (receive time minus the
message's due time): p10 … p90, p95, p99, p99.9, max, mean and standard deviation.

Files may be gzip-compressed (.csv.gz). The parts of one run (--workers, --shard) are given
together and merged in time order. The older headerless five-column format
(message_id,sender_id,client_id,event,unix_us) is read with --steps FILE, a file of
"rooms,room_size,path" lines, one step per CSV file; its messages each expect room_size
deliveries.

With --out DIR it also writes summary.csv, summary.json and timeseries.csv (deliveries
per second and p50/p99 per --interval) there; "scalechat report" draws them. Latencies are
in milliseconds (p50_ms, p99_ms, …), taken from an HdrHistogram with 3 significant digits;
mean, standard deviation and max are exact.

The run's <out>.meta.json is read when it lies beside the files (or names them in "parts"):
steps whose load generator was saturated get a warning.

Ids in the older format are any text without a comma (the original client wrote UUIDs).
Rows that are not chat events (message_id 0 without a sender: a control frame recorded by a
client that knows only chat frames) are counted as ignored.

Malformed rows are counted and the first ones reported as file:line: reason; a partial last
line is skipped. The exit status is non-zero when an input cannot be read, when no row is a
chat event, or when malformed rows are more than --max-malformed percent of all rows.

--slo judges each step against objectives such as p99<50ms or delivery>=99.9%, and the
whole run (the overall figures) against run:p99<50ms (the connection counts and cpu_per_delivery come from the run's meta.json and server CSV when
found); the verdicts are printed, written into summary.json ("slo") and, with --junit,
as JUnit XML. Exit code 3 when an objective is missed, 4 when one is inconclusive.`,
		Example: `  scalechat analyze run.csv
  scalechat analyze --out results/ run-w0.csv.gz run-w1.csv.gz
  scalechat analyze --steps steps.txt --out results/`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.slo.parse(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			res, err := runAnalyze(cmd, f, args)
			if res != nil {
				if err := res.WriteTable(cmd.OutOrStdout()); err != nil {
					return err
				}
				slo.Print(cmd.OutOrStdout(), res.SLO)
			}
			if err != nil || len(f.slo.objs) == 0 {
				return err
			}
			start, end := time.UnixMicro(res.Overall.StartUnixUS), time.UnixMicro(res.Overall.EndUnixUS)
			return f.slo.verdict(suiteFor("analyze "+strings.Join(args, " "), start, end, res.SLO), nil)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "write summary.csv, summary.json and timeseries.csv into this `DIR`")
	fl.StringVar(&f.steps, "steps", "", "read the older headerless format: a `FILE` of rooms,room_size,path lines, one step per CSV file")
	fl.StringVar(&f.meta, "meta", "", "the run's meta.json `FILE` (default: found beside the inputs)")
	fl.DurationVar(&f.window, "window", 2*time.Minute, "how long a message waits for missing deliveries after its due time; later ones may count as orphans (bounds memory)")
	fl.DurationVar(&f.interval, "interval", time.Second, "time-series bucket")
	fl.IntVar(&f.workers, "workers", 0, "parser goroutines and join shards (default: GOMAXPROCS)")
	fl.IntVar(&f.top, "top-rooms", 10, "hottest rooms kept per step")
	addMaxMalformed(cmd, &f)
	f.slo.define(fl)
	return cmd
}

// runAnalyze runs the analysis of args and writes the --out files.
func runAnalyze(cmd *cobra.Command, f analyzeFlags, args []string) (*analyze.Result, error) {
	var inputs []analyze.Input
	if f.steps != "" {
		in, err := analyze.ReadSteps(f.steps)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, in...)
	}
	for _, a := range args {
		inputs = append(inputs, analyze.Input{Path: a})
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("no input: give CSV files or --steps FILE (see --help)")
	}
	if f.interval <= 0 || f.window <= 0 {
		return nil, fmt.Errorf("--interval and --window must be positive")
	}
	if f.maxMalformed < 0 || f.maxMalformed > 100 {
		return nil, fmt.Errorf("--max-malformed is a percentage from 0 to 100")
	}
	res, err := analyze.Run(cmd.Context(), analyze.Options{
		Inputs: inputs, Window: f.window, Interval: f.interval, Workers: f.workers, TopRooms: f.top,
	})
	if err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	if res.Rows == 0 {
		return nil, res.Check(f.maxMalformed / 100)
	}
	metaPath := f.meta
	if metaPath == "" {
		paths := make([]string, len(inputs))
		for i, in := range inputs {
			paths[i] = in.Path
		}
		if metaPath, err = analyze.FindMeta(paths); err != nil {
			return nil, err
		}
		if metaPath == "" {
			// No metadata: a server CSV may still lie beside the first file.
			p := strings.TrimSuffix(strings.TrimSuffix(paths[0], ".gz"), ".csv") + ".server.csv"
			if _, err := os.Stat(p); err == nil {
				res.ServerMetrics, _ = filepath.Abs(p)
			}
		}
	}
	if metaPath != "" {
		if err := analyze.AttachMeta(res, metaPath); err != nil {
			return nil, fmt.Errorf("read metadata: %w", err)
		}
	}
	if len(f.slo.objs) > 0 {
		res.SLO = judgeAnalysis(res, f.slo.objs)
	}
	if f.out != "" {
		if err := res.WriteFiles(f.out); err != nil {
			return nil, fmt.Errorf("write results: %w", err)
		}
	}
	// The files are written even then: they show what was wrong.
	return res, res.Check(f.maxMalformed / 100)
}

// judgeAnalysis evaluates objs on the analysed steps, with the connection
// counts of the run's meta.json and the server's CPU from its server CSV
// when they were found.
func judgeAnalysis(res *analyze.Result, objs []slo.Objective) []slo.Result {
	var rows []results.ServerRow
	if res.ServerMetrics != "" {
		rows, _, _ = results.ReadServer(res.ServerMetrics)
	}
	steps := make([]slo.Step, len(res.Steps))
	for i, s := range res.Steps {
		var meta *results.StepMeta
		if res.Meta != nil {
			for j := range res.Meta.Steps {
				if res.Meta.Steps[j].Name == s.Step {
					meta = &res.Meta.Steps[j]
				}
			}
		}
		steps[i] = slo.FromStats(s, meta, rows)
	}
	// The whole run: the analysis's overall figures, the counts of every
	// step's meta.json.
	var metas []results.StepMeta
	var pooled *results.StepMeta
	if res.Meta != nil {
		metas = res.Meta.Steps
		w := slo.Pool(metas)
		pooled = &w
	}
	steps = append(steps, slo.AsRun(slo.FromStats(res.Overall, pooled, nil), metas, rows))
	return slo.Evaluate(objs, steps)
}

func addMaxMalformed(cmd *cobra.Command, f *analyzeFlags) {
	cmd.Flags().Float64Var(&f.maxMalformed, "max-malformed", 1, "fail when more than this `PERCENT` of the rows are malformed")
}
