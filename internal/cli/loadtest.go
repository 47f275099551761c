//go:build linux

package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/version"
)

func newLoadtestCmd() *cobra.Command {
	var o loadtestFlags
	cmd := &cobra.Command{
		Use:     "loadtest",
		Short:   "Simulate thousands of chat clients and record every message sent and received",
		Long:    loadtestLong,
		Example: loadtestExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			hard, stopSignals := secondInterrupt(ctx)
			defer stopSignals()
			if o.isWorker {
				if err := loadtest.RunWorker(ctx, hard, c.InOrStdin(), c.OutOrStdout()); err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				return nil
			}
			cfg, err := o.config(c)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := o.judging(cfg); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if o.find.dimension != "" {
				return runFind(hard, c, cfg, &o.find, &o.slo)
			}
			return runLoadtest(hard, c, cfg, o.dryRun, &o.slo)
		},
	}
	o.define(cmd.Flags())
	return cmd
}

// loadtestFlags are the flags of scalechat loadtest that are not fields of
// loadtest.Config as they are.
type loadtestFlags struct {
	step      loadtest.Step
	cfg       loadtest.Config
	scenario  string
	sources   string
	shard     string
	pause     time.Duration
	connTO    time.Duration
	isWorker  bool
	roomPfx   string
	dryRun    bool
	msgFreq   time.Duration
	duration  time.Duration
	drain     time.Duration
	stepName  string
	outFlag   string
	loopCount int
	pollIv    time.Duration
	pollWait  time.Duration
	slo       sloFlags
	find      findFlags
}

// judging reads --slo (and --find's flags) into cfg.
func (o *loadtestFlags) judging(cfg *loadtest.Config) error {
	if err := o.slo.parse(); err != nil {
		return err
	}
	names := make([]string, len(cfg.Steps))
	for i, s := range cfg.Steps {
		names[i] = s.Name
	}
	if err := o.slo.checkSteps(names, true); err != nil {
		return err
	}
	cfg.SLO = o.slo.objs
	if o.find.dimension == "" {
		return nil
	}
	return o.find.check(cfg)
}

func (o *loadtestFlags) define(f *pflag.FlagSet) {
	f.StringVar(&o.cfg.URL, "url", "ws://127.0.0.1:8080/ws", "server base URL; in chat mode the room is appended as /{room}; with --transport poll the server's http:// URL (default http://127.0.0.1:8080)")
	f.StringVar(&o.cfg.Transport, "transport", loadtest.TransportWS, "ws (a WebSocket per client) or poll (HTTP: POST to send, GET /rooms/{room}/messages to receive)")
	f.DurationVar(&o.pollIv, "poll-interval", 0, "with --transport poll: poll without wait every interval (plain polling); 0 = long polling")
	f.DurationVar(&o.pollWait, "poll-wait", loadtest.DefaultPollWait, "with --transport poll: how long a long poll asks the server to wait (at most 60s)")
	f.StringVar(&o.cfg.Protocol, "protocol", loadtest.ProtocolScalechat, "what the server speaks (docs/loadtest.md): scalechat; legacy (the original five-field JSON, room from the URL); centrifugo (the Centrifugo client protocol over JSON, channels NAMESPACE:ROOM, --url used as is); socketio (Socket.IO 4 over WebSocket: emit join with the room, acked, and chat events the server emits to the room; --url ws://HOST:PORT, path /socket.io/ unless given); echo (any WebSocket echo server, --url used as is)")
	f.StringVar(&o.cfg.Namespace, "namespace", "chat", "with --protocol centrifugo: the channels' namespace (\"\" for none); with --protocol socketio: the Socket.IO namespace (the main one, /, unless given)")
	f.Int64Var(&o.cfg.MaxUnexpected, "max-unexpected", 0, "deliveries from senders or rooms this run did not create that a step may see before the exit code says failure")
	def := loadtest.DefaultStep()
	f.StringVar(&o.stepName, "step-name", def.Name, "name of the step in the CSV when no --scenario is given")
	f.IntVar(&o.step.Rooms, "rooms", def.Rooms, "number of rooms")
	f.IntVar(&o.step.RoomSize, "room-size", def.RoomSize, "clients per room (clients = rooms × room size)")
	f.IntVar(&o.step.RoomsPerClient, "rooms-per-client", def.RoomsPerClient, "rooms each client joins: its own plus K-1 chosen at random; it posts into them round robin")
	f.IntVar(&o.step.NumClients, "clients", 0, "clients of the step, spread evenly over the rooms; 0 = rooms × room size")
	f.IntVar(&o.step.Senders, "senders", 0, "how many of the clients send (spread evenly over them); the others only receive; 0 = all")
	f.Float64Var(&o.step.RoomSkew, "room-skew", 0, "Zipf exponent of the clients' spread over rooms: 0 = even, 1 = a few hot rooms hold most clients")
	f.DurationVar(&o.msgFreq, "msg-frequency", def.MsgFrequency.D(), "interval between two messages of one client; 0 = connect and hold only")
	f.IntVar(&o.step.MsgSize, "msg-size", def.MsgSize, "bytes of text per message")
	f.DurationVar(&o.duration, "duration", def.Duration.D(), "how long each step sends (or holds, with --msg-frequency 0)")
	f.Float64Var(&o.step.Ramp, "ramp", def.Ramp, "new connections per second (for the whole run, all workers and shards)")
	f.DurationVar(&o.drain, "drain", def.Drain.D(), "after sending stops, wait at most this long for messages in flight")
	f.StringVar(&o.scenario, "scenario", "", "YAML scenario file with a list of steps (flags give the defaults); see scenarios/")
	f.DurationVar(&o.pause, "pause", 2*time.Second, "pause between steps (a scenario's pause: wins unless this flag is set)")
	f.StringVar(&o.outFlag, "out", "", "CSV path, .gz for gzip (default results/<timestamp>.csv); metadata goes to <out without .csv>.meta.json")
	f.BoolVar(&o.cfg.Compression, "compression", false, "offer permessage-deflate (RFC 7692) on every WebSocket; the server decides (scalechat serve --compression); recorded in meta.json")
	f.BoolVar(&o.cfg.NoCSV, "no-csv", false, "write no CSV of events (meta.json and the summary only), e.g. to measure the cost of recording")
	f.StringVar(&o.roomPfx, "room-prefix", "", "prefix of room names, unique per run so runs never see each other's history (default: a random run id)")
	f.Uint64Var(&o.cfg.Seed, "seed", 1, "seed of the room plan (every shard of a run must use the same)")
	f.StringVar(&o.sources, "source-ips", "", "local addresses to connect from, e.g. 127.0.0.1-127.0.0.4 (each has its own ephemeral ports)")
	f.IntVar(&o.cfg.Workers, "workers", 1, "child processes to spread the clients over (each has its own open-file limit and CSV part)")
	f.StringVar(&o.shard, "shard", "", "run only part i of N of the scenario (i/N, 0-based), e.g. one per machine; needs --room-prefix")
	f.IntVar(&o.loopCount, "loops", 0, "event loops per process (default GOMAXPROCS)")
	f.Float64Var(&o.cfg.MaxLoss, "max-loss", 0, "fraction of expected deliveries a step may lose before the exit code says failure")
	f.DurationVar(&o.connTO, "connect-timeout", 10*time.Second, "a client not joined this long after its connect began counts as a connection error; with --transport poll it also bounds each HTTP request (plus the wait of a long poll)")
	f.StringArrayVar(&o.cfg.ServerMetrics, "server-metrics", nil, "a server's /metrics URL (repeat it, one per node), e.g. http://127.0.0.1:8081/metrics: scraped once a second into <out without .csv>.server.csv")
	f.IntSliceVar(&o.cfg.ServerPIDs, "server-pid", nil, "a local server's process id (repeat it, or comma-separate): its CPU time and RSS read from /proc/PID/stat once a second into the same server CSV, for server CPU per delivery and --find's first limit without --server-metrics (name each server one way only: its CPU would count twice)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the machine check and the plan, then exit")
	f.BoolVar(&o.isWorker, "internal-worker", false, "run as a worker of a parent loadtest (configuration on stdin)")
	_ = f.MarkHidden("internal-worker")
	o.slo.define(f)
	o.find.define(f)
}

// config turns the flags (and the scenario file) into a validated plan.
func (o *loadtestFlags) config(c *cobra.Command) (*loadtest.Config, error) {
	cfg := o.cfg
	step := o.step
	step.Name = o.stepName
	step.MsgFrequency = loadtest.Duration(o.msgFreq)
	step.Duration = loadtest.Duration(o.duration)
	step.Drain = loadtest.Duration(o.drain)
	cfg.Steps = []loadtest.Step{step}
	cfg.Pause = loadtest.Duration(o.pause)
	if o.scenario != "" {
		sc, err := loadtest.LoadScenario(o.scenario, step)
		if err != nil {
			return nil, err
		}
		cfg.Steps = sc.Steps
		cfg.Scenario = sc.Name
		if len(sc.SLO) > 0 && !c.Flags().Changed("slo") {
			o.slo.exprs = sc.SLO // the file's objectives, unless --slo replaces them
		}
		if sc.Pause != nil && !c.Flags().Changed("pause") {
			cfg.Pause = *sc.Pause
		}
	}
	var err error
	if cfg.SourceIPs, err = loadtest.ParseSourceIPs(o.sources); err != nil {
		return nil, err
	}
	if o.shard != "" {
		if cfg.Shard, cfg.Shards, err = loadtest.ParseShard(o.shard); err != nil {
			return nil, err
		}
	}
	cfg.RoomPrefix = o.roomPfx
	if cfg.RoomPrefix == "" {
		if cfg.Shards > 1 {
			return nil, errors.New("--shard needs --room-prefix, the same for every shard of the run")
		}
		cfg.RoomPrefix = newRunID()
	}
	if cfg.Protocol == loadtest.ProtocolSocketIO && !c.Flags().Changed("namespace") {
		cfg.Namespace = "" // the flag's default is centrifugo's
	}
	if cfg.Transport == loadtest.TransportPoll && !c.Flags().Changed("url") {
		cfg.URL = "http://127.0.0.1:8080"
	}
	cfg.PollInterval = loadtest.Duration(o.pollIv)
	cfg.PollWait = loadtest.Duration(o.pollWait)
	cfg.ConnectTimeout = loadtest.Duration(o.connTO)
	cfg.Loops = o.loopCount
	if cfg.Loops == 0 {
		cfg.Loops = runtime.GOMAXPROCS(0)
	}
	cfg.Out = o.outFlag
	if cfg.Out == "" {
		cfg.Out = "results/" + time.Now().Format("20060102-150405") + ".csv"
	}
	cfg.Args = os.Args[1:]
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// runLoadtest checks the machine can hold the plan, runs it and turns its
// outcome into the exit code.
func runLoadtest(hard context.Context, c *cobra.Command, cfg *loadtest.Config, dryRun bool, sf *sloFlags) error {
	stderr := c.ErrOrStderr()
	m := loadtest.InspectMachine()
	fmt.Fprintln(stderr, m)
	if err := m.Check(cfg); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	fmt.Fprintf(stderr, "run: %d step(s), room prefix %s, %d worker(s), shard %d/%d, writing %s\n",
		len(cfg.Steps), cfg.RoomPrefix, cfg.Workers, cfg.Shard, cfg.Shards, cfg.Out)
	if dryRun {
		return nil
	}
	res, err := loadtest.Run(c.Context(), hard, cfg, loadtest.Options{
		Stdout: c.OutOrStdout(), Stderr: stderr, TTY: isTerminal(stderr), Machine: m,
		Version: version.Version(), WorkerArgs: []string{"loadtest", "--internal-worker"},
	})
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if len(cfg.SLO) > 0 {
		return judgeRun(res, cfg, sf)
	}
	if len(res.Failures) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%d failure(s):\n  %s", len(res.Failures), strings.Join(res.Failures, "\n  "))}
	}
	if res.Interrupted {
		return &exitError{code: exitInterrupted, err: errors.New("interrupted; the results cover what ran")}
	}
	return nil
}

const loadtestLong = `loadtest starts many WebSocket chat clients in this process (or in --workers child
processes), puts them in rooms, makes each send a message every --msg-frequency on an
open-loop schedule, and writes one CSV row per message sent and per message received
(docs/csv.md), plus <out without .csv>.meta.json. Latency is measured from the instant a message was
due, so a slow server's queueing counts (no coordinated omission).

Each step connects its clients at --ramp per second, waits until every client has joined,
sends for --duration, stops sending, waits up to --drain for messages in flight, closes
every connection with 1000 and prints a summary row. A scenario file (--scenario) runs
several steps one after another (see scenarios/ and docs/loadtest.md).

Ctrl+C stops sending, drains and closes; a second Ctrl+C stops at once. Either way the
CSV holds whole rows only. The exit code is 1 when a step had connection errors or lost
more than --max-loss of its expected deliveries, 2 for a plan the machine cannot hold,
130 after Ctrl+C.

--transport poll uses the server's HTTP transport instead (docs/protocol.md): each client is
a goroutine with its own HTTP connections; it joins with a first GET of its room, receives
by long polling (GET with since and --poll-wait) or, with --poll-interval, by plain polling
(GET without wait every interval), and sends each message with a POST on the same schedule.
Same CSV, same summary; failed requests (HTTP errors such as 429, timeouts) are counted in
meta.json and make the exit code 1.

--slo judges each step against objectives such as p99<50ms, delivery>=99.9% or
big:connect_errors==0, and the whole run, every step pooled, against run:p99<50ms
(docs/loadtest.md, "Does it meet our SLO?"): the verdicts are printed,
recorded in meta.json and, with --junit FILE, written as JUnit XML. With --slo the exit code
is 0 when every objective is met, 3 when one is missed (or a check of the run above failed),
4 when one is inconclusive (the generator saturated, or the figure was not measured), 1 when
the run could not be judged (a step connected nobody or is incomplete).

--find rate|clients|room-size searches the knee: the highest load that meets --slo, growing
the load from --find-start by --find-factor until an objective is missed, then bisecting to
--find-resolution; each probe is a run of its own (<out>.p01.csv, .meta.json) of two steps,
a warm-up of --find-warmup (recorded, not judged) and the measured step, and the search
is written to <out>.knee.json with the first limit at the knee (generator, rate limit,
refusals, file descriptors, network, server CPU, connections, latency; the network when a link
of this machine with a known speed ran at 90 % of it). A knee the generator limits is
reported as "generator-limited: the server's knee is above X" (exit 4), never as the server's.`

const loadtestExample = `  # 10 rooms of 20 clients, one 256-byte message per client per second, for 30 s
  scalechat loadtest --url ws://127.0.0.1:8080/ws --rooms 10 --room-size 20 --duration 30s

  # a sweep from a scenario file, results gzipped
  scalechat loadtest --scenario scenarios/one-room-sweep.yaml --out results/sweep.csv.gz

  # 30,000 clients over 2 worker processes and 4 source addresses
  scalechat loadtest --rooms 7500 --room-size 4 --workers 2 --source-ips 127.0.0.1-127.0.0.4

  # part 2 of 4 of a scenario spread over machines (e.g. a Kubernetes Indexed Job)
  scalechat loadtest --scenario s.yaml --shard ${JOB_COMPLETION_INDEX}/4 --room-prefix run42 \
      --out results/run42.shard${JOB_COMPLETION_INDEX}.csv

  # the same over HTTP long polling, then plain polling twice a second
  scalechat loadtest --transport poll --url http://127.0.0.1:8080 --rooms 10 --room-size 20
  scalechat loadtest --transport poll --poll-interval 500ms --url http://127.0.0.1:8080 --rooms 10 --room-size 20

  # with the server's CPU, memory and processing time beside the results
  scalechat loadtest --rooms 10 --room-size 20 --server-metrics http://127.0.0.1:8081/metrics

  # a local server's CPU from /proc (a server without /metrics), judged per delivery
  scalechat loadtest --rooms 10 --room-size 20 --server-pid "$(pgrep -nx scalechat)" --slo 'cpu_per_delivery<20us'

  # a Socket.IO 4 server with the join and chat handlers of docs/loadtest.md
  scalechat loadtest --protocol socketio --url ws://127.0.0.1:3000 --rooms 10 --room-size 20

  # a CI gate: exit 3 and a JUnit failure when an objective is missed
  scalechat loadtest --rooms 10 --room-size 20 --slo 'p99<50ms,delivery>=99.9%' --junit slo.xml

  # how many messages per second per client before an objective breaks?
  scalechat loadtest --rooms 10 --room-size 5 --duration 10s --find rate --slo 'p99<50ms,delivery>=99.9%'

  # any WebSocket echo server
  scalechat loadtest --protocol echo --url ws://127.0.0.1:9000/echo --rooms 100 --room-size 1`

// judgeRun turns a run judged against --slo into the exit code: could not
// run (1) when a step is missing, incomplete or connected nobody, else the
// SLOs' verdict (3 missed, 4 inconclusive), else 130 after Ctrl+C.
func judgeRun(res *loadtest.Result, cfg *loadtest.Config, sf *sloFlags) error {
	if reason := notRun(res, cfg); reason != "" {
		return &exitError{code: exitFailed, err: errors.New(reason)}
	}
	err := sf.verdict(suiteFor("loadtest "+cfg.Out, res.Meta.StartedAt, res.Meta.EndedAt, res.SLO), res.Failures)
	if err == nil && res.Interrupted {
		return &exitError{code: exitInterrupted, err: errors.New("interrupted; the results cover what ran")}
	}
	return err
}

// notRun says why a run measured nothing to judge, or "".
func notRun(res *loadtest.Result, cfg *loadtest.Config) string {
	if len(res.Meta.Steps) < len(cfg.Steps) && !res.Interrupted {
		return fmt.Sprintf("could not run: %d of %d step(s) finished", len(res.Meta.Steps), len(cfg.Steps))
	}
	for _, s := range res.Meta.Steps {
		switch {
		case s.Incomplete != "":
			return fmt.Sprintf("could not run: step %s is incomplete (%s)", s.Name, s.Incomplete)
		case s.Joined == 0 && s.LocalClients > 0:
			return fmt.Sprintf("could not run: no client of step %s connected (first error: %s)", s.Name, s.FirstError)
		}
	}
	return ""
}

// secondInterrupt returns a context cancelled by the second SIGINT/SIGTERM
// (the root context already ends at the first).
func secondInterrupt(ctx context.Context) (context.Context, func()) {
	hard, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n := 0
		for {
			select {
			case <-sigs:
				if n++; n >= 2 {
					cancel()
				}
			case <-done:
				return
			}
		}
	}()
	return hard, func() {
		signal.Stop(sigs)
		close(done)
		<-stopped
		cancel()
	}
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("lt%x", b)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
