//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/scalechat/scalechat/internal/knee"
	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
	"github.com/scalechat/scalechat/internal/version"
)

// findFlags are loadtest's knee search: --find and its bounds.
type findFlags struct {
	dimension   string
	start, max  float64
	factor      float64
	resolution  string
	res         float64
	probes      int
	warmup      time.Duration
	serverCores int
}

func (o *findFlags) define(f *pflag.FlagSet) {
	f.StringVar(&o.dimension, "find", "", "search for the knee: the highest load that meets --slo, growing rate (msg/s per client), clients or room-size from --find-start until an SLO breaks, then bisecting (docs/loadtest.md#how-far-can-it-go)")
	f.Float64Var(&o.start, "find-start", 0, "the first load of --find (default: the load the other flags give: 1 / --msg-frequency, rooms × room size, or --room-size)")
	f.Float64Var(&o.max, "find-max", 0, "the highest load --find tries (default 1024 × --find-start)")
	f.Float64Var(&o.factor, "find-factor", 2, "how much --find grows the load between probes until an SLO breaks")
	f.StringVar(&o.resolution, "find-resolution", "10%", "--find bisects until the load that breaks an SLO is within this of the load that meets them")
	f.IntVar(&o.probes, "find-probes", 12, "at most this many probes (each a warm-up step of --find-warmup, then a measured step of --duration)")
	f.DurationVar(&o.warmup, "find-warmup", 2*time.Second, "each probe first runs its load this long as a step of its own that is recorded but not judged (0: no warm-up)")
	f.IntVar(&o.serverCores, "server-cores", 0, "cores the server may use, to tell when its CPU (from --server-metrics or --server-pid) is the limit (default: this machine's when --url is a loopback address)")
}

// check validates the search against the plan.
func (o *findFlags) check(cfg *loadtest.Config) error {
	if o.dimension != "rate" && o.dimension != "clients" && o.dimension != "room-size" {
		return fmt.Errorf("--find must be rate, clients or room-size, not %q", o.dimension)
	}
	if len(cfg.SLO) == 0 {
		return errors.New("--find needs --slo: the knee is the highest load that meets them")
	}
	if cfg.Scenario != "" || len(cfg.Steps) != 1 || cfg.Shards > 1 {
		return errors.New("--find runs its own steps: it takes the flags of one step, not --scenario or --shard")
	}
	for _, ob := range cfg.SLO {
		if ob.Step != "" {
			return fmt.Errorf("SLO %s names a step: with --find every probe is judged on every SLO", ob)
		}
	}
	s := cfg.Steps[0]
	if o.dimension == "rate" && s.MsgFrequency <= 0 {
		return errors.New("--find rate needs clients that send (--msg-frequency above 0)")
	}
	if o.dimension == "room-size" && s.NumClients > 0 {
		return errors.New("--find room-size grows --room-size: leave out --clients")
	}
	if o.start == 0 {
		o.start = o.load(s)
	}
	if o.max == 0 {
		o.max = 1024 * o.start
	}
	r, err := parseShare(o.resolution)
	if err != nil {
		return fmt.Errorf("--find-resolution: %w", err)
	}
	o.res = r
	if o.warmup < 0 {
		return fmt.Errorf("--find-warmup must not be negative, not %s", o.warmup)
	}
	if o.start <= 0 || o.max < o.start || o.factor <= 1 || o.probes < 1 {
		return fmt.Errorf("--find-start %g, --find-max %g, --find-factor %g and --find-probes %d do not make a search (start > 0, max ≥ start, factor > 1, probes ≥ 1)",
			o.start, o.max, o.factor, o.probes)
	}
	return nil
}

// parseShare reads "10%" or "0.1".
func parseShare(s string) (float64, error) {
	v, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%q is not a positive share (want e.g. 10%% or 0.1)", s)
	}
	if pct {
		f /= 100
	}
	return f, nil
}

// load is the load step s puts on the searched dimension.
func (o *findFlags) load(s loadtest.Step) float64 {
	switch o.dimension {
	case "rate":
		// 4 significant digits: the interval is whole microseconds.
		r, _ := strconv.ParseFloat(strconv.FormatFloat(float64(time.Second)/float64(s.MsgFrequency.D()), 'g', 4, 64), 64)
		return r
	case "clients":
		return float64(s.Clients())
	}
	return float64(s.RoomSize)
}

// unit names the dimension's load for people.
func (o *findFlags) unit() string {
	switch o.dimension {
	case "rate":
		return "msg/s per client"
	case "clients":
		return "clients"
	}
	return "clients per room"
}

// at returns step s set to load (rounded to what the dimension can run).
func (o *findFlags) at(s loadtest.Step, load float64) loadtest.Step {
	switch o.dimension {
	case "rate":
		s.MsgFrequency = loadtest.Duration(time.Duration(math.Round(float64(time.Second)/load/1e3)) * time.Microsecond)
	case "clients":
		if s.NumClients > 0 {
			s.NumClients = max(1, int(math.Round(load)))
		} else {
			s.Rooms = max(1, int(math.Round(load/float64(s.RoomSize))))
		}
	default:
		s.RoomSize = max(1, int(math.Round(load)))
	}
	return s
}

// search is one knee search in progress.
type search struct {
	c     *cobra.Command
	hard  context.Context
	base  *loadtest.Config
	fl    *findFlags
	sf    *sloFlags
	m     loadtest.Machine
	cores int
	knee  results.Knee
	steps map[float64]results.StepMeta // the probes' steps by load
	rows  map[float64][]results.ServerRow
	suite []slo.Suite
}

// errInconclusive stops a search whose probe could not be judged.
var errInconclusive = errors.New("inconclusive")

func runFind(hard context.Context, c *cobra.Command, cfg *loadtest.Config, fl *findFlags, sf *sloFlags) error {
	stderr := c.ErrOrStderr()
	m := loadtest.InspectMachine()
	fmt.Fprintln(stderr, m)
	s := &search{c: c, hard: hard, base: cfg, fl: fl, sf: sf, m: m, cores: fl.serverCores,
		steps: map[float64]results.StepMeta{}, rows: map[float64][]results.ServerRow{}}
	if s.cores == 0 && loopback(cfg.URL) {
		s.cores = m.Cores
	}
	s.knee = results.Knee{Dimension: fl.dimension, Unit: fl.unit(), SLO: sf.exprs, Start: fl.start, Max: fl.max, Resolution: fl.res, Probes: []results.Probe{}}
	fmt.Fprintf(stderr, "find: the highest %s meeting %s, from %g up to %g, resolution %g%%, at most %d probes of %s each, writing %s\n",
		fl.unit(), strings.Join(sf.exprs, ","), fl.start, fl.max, 100*fl.res, fl.probes, cfg.Steps[0].Duration.D(), results.KneePath(cfg.Out))
	r, err := knee.Search(c.Context(), knee.Options{Start: fl.start, Max: fl.max, Factor: fl.factor, Resolution: fl.res, MaxProbes: fl.probes}, s.probe)
	if c.Context().Err() != nil {
		s.answer(r)
		_ = s.write()
		return &exitError{code: exitInterrupted, err: errors.New("interrupted; the knee file covers the probes that ran")}
	}
	if err != nil && !errors.Is(err, errInconclusive) {
		_ = s.write()
		return &exitError{code: exitFailed, err: err}
	}
	code := s.answer(r)
	if errors.Is(err, errInconclusive) {
		code = exitInconclusive
		s.knee.Answer = fmt.Sprintf("inconclusive: %v", err)
	}
	s.print(c.OutOrStdout())
	if werr := s.write(); werr != nil {
		return &exitError{code: exitFailed, err: werr}
	}
	if code == exitInconclusive && sf.inconclusive == "pass" {
		code = 0
	}
	if code != 0 {
		return &exitError{code: code, err: errors.New(s.knee.Answer)}
	}
	return nil
}

// probe runs one step at load and judges it. A probe whose generator
// saturated is run once more: on a shared machine a stall of a few hundred
// milliseconds (another process's burst) flags a step the generator could
// carry; saturated twice, it could not.
func (s *search) probe(ctx context.Context, load float64) (float64, knee.Outcome, error) {
	ran, o, err := s.probeOnce(ctx, load)
	if o == knee.Saturated && err == nil && ctx.Err() == nil && len(s.knee.Probes) < s.fl.probes+2 {
		fmt.Fprintf(s.c.ErrOrStderr(), "probe at %g %s: the generator saturated; once more\n", ran, s.fl.unit())
		return s.probeOnce(ctx, load)
	}
	return ran, o, err
}

// probeOnce runs one probe at load, bounded in time, and judges it: a
// warm-up step (when --find-warmup is set) and the measured step, one
// after the other in one run, each recorded in the probe's meta.json; the
// SLOs are judged on the measured step only.
func (s *search) probeOnce(ctx context.Context, load float64) (float64, knee.Outcome, error) {
	i := len(s.knee.Probes) + 1
	cfg := *s.base
	step := s.fl.at(cfg.Steps[0], load)
	step.Name = fmt.Sprintf("p%02d", i)
	cfg.Steps = []loadtest.Step{step}
	if s.fl.warmup > 0 {
		cfg.Steps = []loadtest.Step{warmupStep(step, s.fl.warmup), step}
		cfg.Pause = 0 // the measured step follows the warm-up at once
	}
	cfg.SLO = onStep(s.base.SLO, step.Name)
	cfg.Out = results.ProbeOut(s.base.Out, i)
	cfg.RoomPrefix = fmt.Sprintf("%sp%02d", s.base.RoomPrefix, i)
	ran := s.fl.load(step)
	stderr := s.c.ErrOrStderr()
	if err := s.m.Check(&cfg); err != nil {
		// The generator cannot hold this load: nothing to say of the server.
		s.addProbe(ran, results.StepMeta{Name: step.Name, Saturated: true, SaturationReason: err.Error()}, nil, nil, cfg.Out)
		return ran, knee.Saturated, nil
	}
	var bound time.Duration
	for _, st := range cfg.Steps {
		bound += time.Duration(float64(st.Clients())/st.Ramp*float64(time.Second)) + cfg.ConnectTimeout.D() + st.Duration.D() + st.Drain.D()
	}
	bound += 30 * time.Second
	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	fmt.Fprintf(stderr, "probe %s: %g %s\n", step.Name, ran, s.fl.unit())
	res, err := loadtest.Run(pctx, s.hard, &cfg, loadtest.Options{
		Stdout: stderr, Stderr: stderr, TTY: isTerminal(stderr), Machine: s.m,
		Version: version.Version(), WorkerArgs: []string{"loadtest", "--internal-worker"},
	})
	if err != nil {
		return ran, knee.Fail, fmt.Errorf("probe %s: %w", step.Name, err)
	}
	if ctx.Err() != nil {
		return ran, knee.Fail, ctx.Err()
	}
	// The warm-up is recorded, not judged: its failures (loss, errors) are
	// in its meta.json but do not fail the probe.
	var failures []string
	for _, f := range res.Failures {
		if len(cfg.Steps) == 1 || !strings.HasPrefix(f, "step "+cfg.Steps[0].Name+": ") {
			failures = append(failures, f)
		}
	}
	if pctx.Err() != nil {
		failures = append(failures, fmt.Sprintf("step %s: did not end within %s", step.Name, bound))
	}
	if len(res.Meta.Steps) != len(cfg.Steps) {
		return ran, knee.Fail, fmt.Errorf("probe %s: the step did not finish", step.Name)
	}
	sm := res.Meta.Steps[len(res.Meta.Steps)-1]
	var rows []results.ServerRow
	if cfg.WatchesServers() {
		rows, _, _ = results.ReadServer(results.ServerMetricsPath(cfg.Out))
	}
	p := s.addProbe(ran, sm, res.SLO, failures, cfg.Out)
	s.rows[ran] = rows
	s.suite = append(s.suite, suiteFor("loadtest --find "+step.Name+" ("+strconv.FormatFloat(ran, 'g', 4, 64)+" "+s.fl.unit()+")",
		res.Meta.StartedAt, res.Meta.EndedAt, res.SLO))
	s.suite[len(s.suite)-1].Checks = failures
	fmt.Fprintf(stderr, "probe %s: %g %s: %s\n", step.Name, ran, s.fl.unit(), p.Verdict)
	switch {
	case sm.Saturated:
		return ran, knee.Saturated, nil
	case p.Verdict == string(slo.Missed):
		return ran, knee.Fail, nil
	case p.Verdict == string(slo.Inconclusive):
		for _, r := range res.SLO {
			if r.Verdict == slo.Inconclusive {
				return ran, knee.Fail, fmt.Errorf("%w: probe %s: %s", errInconclusive, step.Name, r.Reason)
			}
		}
	}
	return ran, knee.Pass, nil
}

// warmupStep is the warm-up of a probe: its load for d, on rooms and
// clients of its own.
func warmupStep(measured loadtest.Step, d time.Duration) loadtest.Step {
	w := measured
	w.Name = measured.Name + "-warmup"
	w.Duration = loadtest.Duration(d)
	return w
}

// onStep returns objs, each judged on step name only.
func onStep(objs []slo.Objective, name string) []slo.Objective {
	out := make([]slo.Objective, len(objs))
	for i, o := range objs {
		o.Step = name
		out[i] = o
	}
	return out
}

// addProbe records a probe in the knee file.
func (s *search) addProbe(load float64, sm results.StepMeta, rs []slo.Result, failures []string, out string) results.Probe {
	verdict := slo.Worst(rs)
	if len(failures) > 0 {
		verdict = slo.Missed
	}
	if sm.Saturated {
		verdict = slo.Inconclusive
	}
	meta, _ := results.Paths(out, s.base.Workers)
	p := results.Probe{Load: load, Step: sm.Name, Meta: filepath.Base(meta), Verdict: string(verdict), SLO: rs, Failures: failures,
		P50: sm.LatencyMs.P50, P99: sm.LatencyMs.P99, Delivery: sm.DeliveryRatio, Sent: sm.Sent, Refused: sm.RateLimited,
		Errors: sm.ConnectErrors + sm.Disconnects + sm.SendErrors + sm.PollErrors, Saturated: sm.SaturationReason}
	if p.SLO == nil {
		p.SLO = []results.SLOResult{}
	}
	s.knee.Probes = append(s.knee.Probes, p)
	s.steps[load] = sm
	return p
}

// answer fills in the knee, its first limit and the answer from r, and
// returns the exit code it gives.
func (s *search) answer(r knee.Result) int {
	k := &s.knee
	k.Stop, k.Knee, k.Above = string(r.Stop), r.Good, r.Bad
	u := s.fl.unit()
	if r.Bad > 0 {
		sm := s.steps[r.Bad]
		cores := 0.0
		if !sm.SendStartedAt.IsZero() {
			cores, _ = knee.ServerCores(s.rows[r.Bad], sm.SendStartedAt.UnixMicro(), sm.SendEndedAt.UnixMicro())
		}
		l := knee.FirstLimit(sm, cores, s.cores)
		k.LimitKind, k.Limit = l.Kind, l.Text
		for i := range k.Probes {
			if k.Probes[i].Load == r.Bad {
				k.Probes[i].ServerCPU = cores
			}
		}
	}
	switch r.Stop {
	case knee.Generator:
		last := k.Probes[len(k.Probes)-1]
		k.LimitKind, k.Limit = "generator", "the load generator saturated ("+last.Saturated+")"
		k.Answer = fmt.Sprintf("generator-limited: the server's knee is above %g %s (at %g the load generator saturated: %s); run the generator on more cores or machines (--workers, --shard)",
			r.Good, u, last.Load, last.Saturated)
		return exitInconclusive
	case knee.FirstFailed:
		k.Answer = fmt.Sprintf("SLO missed at the first load, %g %s: the knee is below it (lower --find-start); first limit: %s", r.Bad, u, k.Limit)
		return exitMissed
	case knee.AboveMax:
		k.Answer = fmt.Sprintf("no knee up to --find-max: every load up to %g %s met the SLOs", r.Good, u)
	case knee.OutOfProbes:
		if r.Bad > 0 {
			k.Answer = fmt.Sprintf("knee between %g and %g %s (out of probes before the resolution); first limit at %g: %s", r.Good, r.Bad, u, r.Bad, k.Limit)
		} else {
			k.Answer = fmt.Sprintf("no knee found in %d probes: every load up to %g %s met the SLOs (raise --find-probes or --find-start)", r.Probes, r.Good, u)
		}
	default:
		k.Answer = fmt.Sprintf("knee: %g %s (%g missed the SLOs); first limit at %g: %s", r.Good, u, r.Bad, r.Bad, k.Limit)
	}
	return 0
}

// print writes the probes and the answer.
func (s *search) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "probe\t%s\tsent\tdelivery\tp50\tp99\trate_limited\terrors\tverdict\t\n", s.fl.unit())
	for _, p := range s.knee.Probes {
		fmt.Fprintf(tw, "%s\t%g\t%d\t%.3f%%\t%s\t%s\t%d\t%d\t%s\t\n", p.Step, p.Load, p.Sent, 100*p.Delivery,
			slo.Format(slo.Duration, p.P50), slo.Format(slo.Duration, p.P99), p.Refused, p.Errors, p.Verdict)
	}
	tw.Flush()
	fmt.Fprintln(w, s.knee.Answer)
}

// write writes the knee file and, with --junit, a testsuite per probe.
func (s *search) write() error {
	if s.sf.junit != "" {
		if err := slo.WriteJUnitFile(s.sf.junit, s.suite); err != nil {
			return err
		}
	}
	return results.WriteKnee(results.KneePath(s.base.Out), &s.knee)
}

// loopback reports whether u's host is a loopback address.
func loopback(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	if p.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(p.Hostname())
	return ip != nil && ip.IsLoopback()
}
