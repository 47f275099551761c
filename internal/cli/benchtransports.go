//go:build linux

package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/bench"
	"github.com/scalechat/scalechat/internal/version"
)

func newBenchTransportsCmd() *cobra.Command {
	opt := bench.DefaultTransportsOptions()
	from, to, step := sweepBounds(opt.Clients)
	var (
		list  = strings.Join(opt.Transports, ",")
		smoke bool
	)
	cmd := &cobra.Command{
		Use:   "transports",
		Short: "Compare WebSocket, HTTP long polling and plain polling as clients grow",
		Long: `transports answers "is polling really that much worse?" with numbers: it runs the
benchmark file scenarios/transports.yaml (embedded) with its sizes from these flags (their
defaults are the file's) and keeps its results folder. For each number of clients (--from
… --to in steps of --step), each client, alone in its room, sends one message and waits
for it to come back; a message not back within --timeout is an error.
Each transport runs against a freshly started server (scalechat serve, pinned to CPU 0
with taskset) driven by scalechat loadtest (pinned to CPU 1): WebSocket, long polling
(GET with --poll-wait) and plain polling (GET every --poll-interval). The transports of one
client count run one after another, so a noisy moment hits them alike.

Per run it records errors, round-trip latency percentiles of the messages back in time,
the server's CPU seconds (from /proc, over the whole run) and the bytes it read and wrote
(WebSocket + HTTP, from its /metrics). Results: transports.csv and transports.json in
--out (docs/csv.md), each run's CSV, meta.json and logs in --out/runs. Draw them with
scalechat report --out DIR <--out>.`,
		Example: `  scalechat bench transports                                   # 100 … 1,000 clients
  scalechat bench transports --from 10 --to 50 --step 10 --timeout 5s
  scalechat report --out report/transports results/transports-20261121-100000`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var err error
			if smoke {
				from, to, step, opt.Timeout = 10, 20, 10, 3*time.Second
			}
			if opt.Clients, err = bench.ClientSteps(from, to, step); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			opt.Transports = nil
			for _, t := range strings.Split(list, ",") {
				if t = strings.TrimSpace(t); t != "" {
					opt.Transports = append(opt.Transports, t)
				}
			}
			if opt.Out == "" {
				opt.Out = "results/transports-" + time.Now().Format("20060102-150405")
			}
			opt.Args, opt.Version = os.Args[1:], version.Version()
			opt.Stdout, opt.Stderr = c.OutOrStdout(), c.ErrOrStderr()
			if _, err := bench.RunTransports(c.Context(), opt); err != nil {
				if errors.Is(err, c.Context().Err()) && c.Context().Err() != nil {
					return &exitError{code: exitInterrupted, err: err}
				}
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "results in %s; draw them with: scalechat report --out %s/report %s\n", opt.Out, opt.Out, opt.Out)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&from, "from", from, "fewest clients")
	f.IntVar(&to, "to", to, "most clients")
	f.IntVar(&step, "step", step, "clients added at each step")
	f.StringVar(&list, "transports", list, "transports to compare, in order: websocket, long-polling, polling")
	f.DurationVar(&opt.Timeout, "timeout", opt.Timeout, "a message not back at its sender within this counts as an error")
	f.DurationVar(&opt.PollWait, "poll-wait", opt.PollWait, "how long a long poll waits for a message")
	f.DurationVar(&opt.PollInterval, "poll-interval", opt.PollInterval, "interval of plain polling")
	f.IntVar(&opt.MsgSize, "msg-size", opt.MsgSize, "bytes of text per message")
	f.Float64Var(&opt.Ramp, "ramp", opt.Ramp, "new connections (first polls) per second")
	f.StringVar(&opt.Out, "out", "", "results folder (default results/transports-<timestamp>)")
	f.BoolVar(&smoke, "smoke", false, "10 and 20 clients, a 3 s timeout: checks the command works, not speed")
	return cmd
}

// sweepBounds are the first, last and step of evenly spaced client
// counts (the file's sweep), for the flags' defaults.
func sweepBounds(clients []int) (from, to, step int) {
	if len(clients) == 0 {
		return 0, 0, 0
	}
	from, to, step = clients[0], clients[len(clients)-1], 1
	if len(clients) > 1 {
		step = clients[1] - clients[0]
	}
	return from, to, step
}
