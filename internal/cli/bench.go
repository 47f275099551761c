package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var opt bench.Options
	long := `bench runs scalechat's fixed benchmark scenarios, each against a freshly started
server (scalechat serve, pinned to CPU 0 with taskset) driven by scalechat loadtest
processes (pinned to CPU 1), on loopback, every phase bounded in time, and prints one
table: deliveries/s, delivery ratio, latency p50/p99/max, server CPU seconds and µs per
delivery (from /proc over the window the traffic flowed), server RSS, generator CPU, whether
the generator saturated (then the server's figure is a lower bound), and each target met
or missed. Results and targets: docs/benchmarks.md.

Scenarios (all by default, in this order):
`
	for _, s := range bench.Scenarios() {
		long += fmt.Sprintf("  %-9s %s\n", s.Name, s.About)
	}
	long += `
--smoke runs every scenario at tiny sizes in a few seconds each: it proves the command
works and says nothing about speed. The exit code is 1 when a scenario could not run;
missed targets are results, shown in the table.

"scalechat bench transports" runs the transports scenario alone, with flags for its sizes,
and keeps its results folder for scalechat report.`
	cmd := &cobra.Command{
		Use:   "bench [scenario...]",
		Short: "Run the fixed benchmark scenarios and print one table of results",
		Long:  long,
		Example: `  scalechat bench                 # everything, about 10 minutes on 2 cores
  scalechat bench idle oneroom    # two scenarios
  scalechat bench --smoke         # tiny sizes, as CI runs it
  scalechat bench transports --from 100 --to 500   # one scenario with its own flags`,
		RunE: func(c *cobra.Command, args []string) error {
			opt.Stdout, opt.Stderr = c.OutOrStdout(), c.ErrOrStderr()
			return bench.Run(c.Context(), args, opt)
		},
	}
	cmd.AddCommand(newBenchTransportsCmd())
	f := cmd.Flags()
	f.BoolVar(&opt.Smoke, "smoke", false, "tiny sizes, a few seconds per scenario (checks the command works, not speed)")
	f.StringVar(&opt.Dir, "dir", "", "keep every child's log, CSV and meta.json in this folder (default: a temporary folder, removed)")
	return cmd
}
