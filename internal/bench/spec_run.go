//go:build linux

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
)

// specStep is one step of a benchmark file as it ran: its row and the
// figures its objectives and figures: rows were judged on.
type specStep struct {
	step    loadtest.Step
	row     Result
	figures map[string]float64
	met     bool     // every objective that applies was met
	extra   []Result // rows after its own: same-node and cross-node deliveries (node_rows)
}

// runSpecSteps runs a benchmark file's steps one after another against
// its servers (each its own generator, or one per node; a step with: the
// one before runs beside it), a row per step judged against the file's
// objectives, then its figures and knee.
func (r *runner) runSpecSteps(ctx context.Context, sp *spec, steps []loadtest.Step) ([]Result, error) {
	setups := newSpecSetups(r, sp)
	defer setups.stop()
	var done []specStep
	var rows []Result
	var at []int // the index in rows of each done step's row
	stopped := ""
	for i := 0; i < len(steps) && stopped == ""; {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		if err := setups.alive(); err != nil {
			return rows, err
		}
		n := 1
		for i+n < len(steps) && sp.stepBench[steps[i+n].Name].With != "" {
			n++
		}
		if why := sp.tooMany(steps[i:i+n], int(inspectHost().NofileSoft)); why != "" {
			stopped = why
			if sp.bench.Knee == nil {
				rows = append(rows, Result{Scenario: sp.rowName(steps[i]), Ratio: -1, Verdict: "n/a", Note: why})
			}
			break
		}
		got, err := r.specGroup(ctx, sp, setups, steps[i:i+n])
		setups.endGroup(steps[i+n:])
		if err != nil {
			return rows, err
		}
		for _, g := range got {
			done = append(done, g)
			at = append(at, len(rows))
			rows = append(rows, g.row)
			rows = append(rows, g.extra...)
			if sp.bench.Until == "knee" && stopped == "" && (!g.met || g.row.Saturated) {
				stopped = fmt.Sprintf("stopped at %s: %s", g.row.Scenario, g.row.Verdict)
			}
		}
		if i += n; stopped == "" && i < len(steps) {
			if p := sp.pause(r.smoke); p > 0 {
				time.Sleep(p) // let the servers go quiet between steps
			}
		}
	}
	own := sp.applyFigures(done, rows, at)
	if k := sp.bench.Knee; k != nil {
		rows = append(rows, sp.kneeRow(done, stopped, r.smoke))
	}
	return append(rows, own...), nil
}

// applyFigures puts the figures: with on: on their step's row (rows[at[i]]
// is done[i]'s), with the results file's field as: names, and returns the
// others as rows of their own.
func (sp *spec) applyFigures(done []specStep, rows []Result, at []int) []Result {
	var own []Result
	for _, f := range sp.bench.Figures {
		fig := figureRow(f, done)
		fig.Scenario = sp.expandVars(fig.Scenario)
		if i := slices.IndexFunc(done, func(s specStep) bool { return s.step.Name == f.On }); f.On != "" && i >= 0 {
			onRow(&rows[at[i]], fig)
			if c := rows[at[i]].cluster; f.As == "node_cpu_vs_one_node" && c != nil {
				c.node = sideRatio(done, f)
			}
			continue
		}
		own = append(own, fig)
	}
	return own
}

// tooMany says why steps (run at once) cannot run under the open-file
// limit of each process, nofile, on their servers: a server or a
// generator holds a file per connection besides openFiles of its own,
// and a step beyond would measure refused connections. "" when they fit.
func (sp *spec) tooMany(steps []loadtest.Step, nofile int) string {
	per := 0
	for _, st := range steps {
		n, nodes := st.Clients(), sp.stepNodes(st)
		if nodes > 1 && sp.stepPlace(st) != "first" {
			n = (n + nodes - 1) / nodes
		}
		per += n
	}
	if nofile <= 0 || per <= nofile-openFiles {
		return ""
	}
	return fmt.Sprintf("step %s needs %d connections a process, more than the open-file limit (ulimit -n %d) allows: raise it to go on", steps[0].Name, per, nofile)
}

// onRow puts a figures: row's figure, target and verdict on a step's row:
// the step is met only when its objectives and the figure are.
func onRow(row *Result, fig Result) {
	row.Figure = strings.Trim(row.Figure+"; "+fig.Figure, "; ")
	row.Target = strings.Trim(row.Target+"; "+fig.Target, "; ")
	if fig.Note != "" {
		addNote(row, fig.Note)
	}
	if strings.HasPrefix(fig.Verdict, "MISSED") {
		addNote(row, fmt.Sprintf("%s, not %s", fig.Figure, fig.Target)) // which of the row's figures missed
	}
	switch {
	case strings.HasPrefix(row.Verdict, "MISSED") || strings.HasPrefix(fig.Verdict, "MISSED"):
		row.Verdict = verdict(false, row.Saturated)
	case fig.Verdict == "n/a" || row.Verdict == "–":
		row.Verdict = "–"
	case fig.Verdict != "":
		row.Verdict = verdict(true, row.Saturated)
	}
}

// steps are the file's steps as this run takes them: --smoke's (the
// file's smoke: fields, or every step shrunk), at most smoke_steps of
// them.
func (sp *spec) steps(smoke bool) []loadtest.Step {
	if !smoke {
		return sp.sc.Steps
	}
	steps := sp.sc.SmokeSteps
	if steps == nil {
		small := *sp.sc
		small.Steps = append([]loadtest.Step(nil), sp.sc.Steps...)
		smokeSteps(&small)
		steps = small.Steps
	}
	if n := sp.bench.SmokeSteps; n > 0 && n < len(steps) {
		steps = steps[:n]
	}
	return steps
}

// pause is the file's pause between steps; none with --smoke.
func (sp *spec) pause(smoke bool) time.Duration {
	if smoke || sp.sc.Pause == nil {
		return 0
	}
	return sp.sc.Pause.D()
}

// launched is a step whose generators run.
type launched struct {
	step    loadtest.Step
	gens    []*loadgen
	before  int64        // the servers' RSS before it
	out     int64        // bytes the servers wrote during it; -1: not measured
	scrape  *scraper     // reading the servers' /metrics while it runs, or nil
	scraped string       // what the scraper did, for the row's note
	view    clusterProcs // the servers it runs on
	cpus    string       // the server side's CPUs, for the note
}

// specGroup runs steps at once: the first, then each of the others once
// the one before sends (and its with: after has passed; at: start, at
// once), each against its setup's servers, and makes their rows when all
// are done.
func (r *runner) specGroup(ctx context.Context, sp *spec, setups *specSetups, steps []loadtest.Step) ([]specStep, error) {
	procs, err := setups.forGroup(ctx, steps)
	if err != nil {
		return nil, err
	}
	var runs []launched
	for i, st := range steps {
		if i > 0 && sp.stepBench[st.Name].At != "start" {
			waitSending(ctx, runs[i-1].gens[0], sp.after(st, r.smoke))
		}
		var l launched
		l, err = r.launchStep(ctx, sp, st, procs[i], len(steps) == 1)
		runs = append(runs, l)
		if err != nil {
			break
		}
	}
	gens := make([][]*genRun, len(runs))
	errs := []error{err}
	for i, l := range runs {
		var err error
		gens[i], err = waitGenerators(l.gens)
		errs = append(errs, err)
		if l.scrape != nil {
			runs[i].scraped = l.scrape.end()
		}
		if before := l.out; before >= 0 {
			if after := bytesOut(procs[i].meters); after >= before {
				runs[i].out = after - before
			} else {
				runs[i].out = -1
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("step %s: %w", steps[0].Name, err)
	}
	metas := map[string]results.StepMeta{}
	for i, l := range runs {
		metas[l.step.Name] = poolSteps(gens[i])
	}
	var out []specStep
	for i, l := range runs {
		got, err := sp.stepRow(l, gens[i], metas)
		if err != nil {
			return out, fmt.Errorf("step %s: %w", l.step.Name, err)
		}
		out = append(out, got)
	}
	return out, nil
}

// launchStep starts a step's generators against its servers (and their
// scraper); alone, it alone counts the bytes its servers write.
func (r *runner) launchStep(ctx context.Context, sp *spec, st loadtest.Step, p *setupProcs, alone bool) (launched, error) {
	l := launched{step: st, out: -1, cpus: r.serverList()}
	var err error
	if l.view, err = p.view(ctx, r, sp.stepNodes(st)); err != nil {
		return l, err
	}
	for _, n := range l.view.nodes {
		l.before += n.now().rss
	}
	if alone && len(p.meters) > 0 {
		l.out = bytesOut(p.meters) // steps at once may share the servers: no step's own
	}
	if every := p.cfg.Scrape.D(); every > 0 && len(p.meters) > 0 {
		l.scrape = startScraper(p.meters[0], every)
	}
	targets := l.view.nodes
	if sp.stepPlace(st) == "first" {
		targets = targets[:1]
	}
	args := append(stepArgs(st), "--source-ips", sources, "--connect-timeout", "30s")
	args = append(args, sp.stepBench[st.Name].Args...)
	timeout := timeoutFor(st.Clients(), st.Ramp, st.Duration.D()+st.Drain.D())
	l.gens, err = r.startGenerators(ctx, safeName(sp.fileTag()+"-"+st.Name), targets, timeout, args)
	if err != nil && l.scrape != nil {
		l.scrape.end()
		l.scrape = nil
	}
	return l, err
}

// waitSending waits until g's traffic flows (or it ended), then after.
func waitSending(ctx context.Context, g *loadgen, after time.Duration) {
	select {
	case <-g.sending:
	case <-g.done:
	case <-ctx.Done():
	}
	select {
	case <-time.After(after):
	case <-ctx.Done():
	}
}

// after is how long a step with: the one before waits once that one sends:
// at most a second with --smoke.
func (sp *spec) after(st loadtest.Step, smoke bool) time.Duration {
	d := sp.stepBench[st.Name].After.D()
	if smoke {
		d = min(d, time.Second)
	}
	return d
}

// stepRow makes a step's row from its generators' runs, and judges it;
// metas are the steps that ran beside it, by name (during:).
func (sp *spec) stepRow(l launched, gens []*genRun, metas map[string]results.StepMeta) (specStep, error) {
	st, sb, cl := l.step, sp.stepBench[l.step.Name], l.view
	name := sp.rowName(st)
	row := mergedRow(name, gens, cl.nodes, cl.redis, st.Duration.D())
	pooled := metas[st.Name]
	var extra []Result
	if len(gens) > 1 {
		lat, err := nodeDeliveries(name, gens, st.Duration.D())
		if err != nil {
			return specStep{}, err
		}
		if lat.all != nil {
			// The shards' own delivery ratios only count their own
			// clients' messages: the whole run's comes from the events.
			row.Ratio, row.P50, row.P99, row.Max = lat.all.ratio(), lat.all.ms(50), lat.all.ms(99), lat.all.ms(100)
		}
		if sb.NodeRows {
			extra = lat.rows
		}
	}
	if cl.redis != nil {
		addNote(&row, fmt.Sprintf("server CPU = the nodes (%s); Redis apart; all on CPU %s", nodeLetters(len(cl.nodes)), l.cpus))
	}
	if len(gens) > 1 {
		addNote(&row, fmt.Sprintf("%d generators, shard i/%d → node %s", len(gens), len(gens), nodeLetters(len(gens))))
	}
	if sb.During != "" {
		if err := during(&row, gens, metas[sb.During]); err != nil {
			return specStep{}, err
		}
	}
	figs := specFigures(&row, pooled, cl.redis != nil, l.before)
	if l.out >= 0 && pooled.ReceivedAll > 0 {
		figs["bytes_per_delivery"] = float64(l.out) / float64(pooled.ReceivedAll)
	}
	if cmp.Or(sb.Latency, sp.bench.Latency) == "connect" {
		row.P50, row.P99, row.Max = pooled.ConnectMs.P50, pooled.ConnectMs.P99, pooled.ConnectMs.Max
	}
	if cl.redis == nil {
		row.cluster = nil // one server: no Redis figure in the results file
	}
	figure := sb.Figure
	if figure == nil {
		figure = sp.bench.Figure
	}
	row.Figure = figureColumn(figure, figs, row)
	if note := cmp.Or(sb.Note, sp.bench.Note); note != "" {
		addNote(&row, sp.expand(note, st, measures(pooled, l.before, row)))
	}
	if l.scraped != "" {
		addNote(&row, l.scraped)
	}
	row.Loops = sp.loops
	row.step, row.figs = st.Name, figs
	got := specStep{step: st, row: row, figures: figs, extra: extra}
	got.met = sp.judge(&got)
	return got, nil
}

// during sets a row's delivery and latency to those of the messages due
// while the step beside it (other) connected: its start to its first send.
func during(row *Result, gens []*genRun, other results.StepMeta) error {
	var paths []string
	for _, g := range gens {
		if g.csv == "" {
			return nil // --no-csv: no events to read
		}
		paths = append(paths, g.csv)
	}
	ev, err := readEvents(paths...)
	if err != nil {
		return err
	}
	from, to := other.StartedAt.UnixMicro(), other.SendStartedAt.UnixMicro()
	if other.SendStartedAt.IsZero() {
		to = other.EndedAt.UnixMicro()
	}
	g := ev.group(func(m sentMsg) bool { return m.due >= from && m.due <= to }, func(_, _ uint64) string { return "" })[""]
	if g == nil || g.count() == 0 {
		addNote(row, "no message of this step was due while the other connected")
		return nil
	}
	addNote(row, fmt.Sprintf("latency of the %d deliveries of messages due during the other step's %.1f s of connecting; the whole step: p99 %s, delivery %s",
		g.count(), float64(to-from)/1e6, ms(row.P99), ratio(row.Ratio)))
	row.P50, row.P99, row.Max, row.Ratio = g.ms(50), g.ms(99), g.ms(100), g.ratio()
	return nil
}

// poolSteps is the step of one generator, or of several (one per node)
// as one: counts summed, the widest sending window, the slowest shard's
// connect times (the caller takes the latencies from the events).
func poolSteps(gens []*genRun) results.StepMeta {
	if len(gens) == 1 {
		return gens[0].step()
	}
	metas := make([]results.StepMeta, len(gens))
	for i, g := range gens {
		metas[i] = g.step()
	}
	w := slo.Pool(metas)
	for _, s := range metas {
		if w.SendStartedAt.IsZero() || (!s.SendStartedAt.IsZero() && s.SendStartedAt.Before(w.SendStartedAt)) {
			w.SendStartedAt = s.SendStartedAt
		}
		if s.SendEndedAt.After(w.SendEndedAt) {
			w.SendEndedAt = s.SendEndedAt
		}
		if s.ConnectMs.P99 > w.ConnectMs.P99 {
			w.ConnectMs = s.ConnectMs
		}
	}
	return w
}

// stepArgs are the loadtest flags of one step.
func stepArgs(s loadtest.Step) []string {
	args := []string{"--rooms", itoa(s.Rooms), "--room-size", itoa(s.RoomSize),
		"--rooms-per-client", itoa(s.RoomsPerClient), "--msg-frequency", s.MsgFrequency.D().String(), "--msg-size", itoa(s.MsgSize),
		"--duration", s.Duration.D().String(), "--ramp", fmt.Sprint(s.Ramp), "--drain", s.Drain.D().String()}
	if s.NumClients > 0 {
		args = append(args, "--clients", itoa(s.NumClients))
	}
	if s.Senders > 0 {
		args = append(args, "--senders", itoa(s.Senders))
	}
	if s.RoomSkew > 0 {
		args = append(args, "--room-skew", fmt.Sprint(s.RoomSkew))
	}
	return args
}

// specFigures are a step's figures by metric: the objectives' (from the
// generators' pooled meta.json, with the row's delivery and latency,
// which for a split run come from the events) and the bench's own.
func specFigures(row *Result, pooled results.StepMeta, redis bool, rssBefore int64) map[string]float64 {
	f := slo.FromMeta(pooled, nil).Figures
	if row.Ratio >= 0 {
		f["delivery"], f["loss"] = row.Ratio, 1-row.Ratio
	}
	if row.P50 > 0 {
		f["p50"], f["p99"], f["max"] = row.P50, row.P99, row.Max
	}
	if row.CPUPerDel > 0 {
		f["cpu_per_delivery"] = row.CPUPerDel / 1000 // slo keeps times in ms
	}
	if pooled.Joined > 0 && row.RSS > 0 {
		f["rss_per_conn"] = float64(row.RSS-rssBefore) / float64(pooled.Joined)
	}
	if w := pooled.SendEndedAt.Sub(pooled.SendStartedAt).Seconds(); w > 0 && row.GenCPU > 0 {
		f["generator_cores"] = row.GenCPU / w
	}
	if row.PerSecond > 0 {
		f["deliveries_per_s"] = row.PerSecond
	}
	gen := time.Duration(row.GenCPU * float64(time.Second))
	if n := pooled.ReceivedAll + pooled.Sent; n > 0 && results.CPUReadable(gen) {
		// Each message received is one recorded row; each sent one more.
		f["generator_per_message"] = row.GenCPU * 1e6 / float64(n)
	}
	if c := row.cluster; redis && c != nil && c.deliveries > 0 && c.redisCPU > 0 {
		us, note := perDelivery(c.redisCPU, c.deliveries)
		if note != "" {
			addNote(row, "Redis "+note)
		} else {
			c.redisUS, f["redis_per_delivery"] = us, us/1000 // slo keeps times in ms
		}
	}
	return f
}

// figureColumn shows the figures the file names, "; " between.
func figureColumn(metrics []string, f map[string]float64, row Result) string {
	var parts []string
	for _, m := range metrics {
		v, ok := f[m]
		switch {
		case m == "cpu_per_delivery":
			parts = append(parts, perDelFigure(row))
		case !ok && m == "redis_per_delivery":
			parts = append(parts, "Redis – µs/deliv")
		case !ok && m == "generator_per_message":
			parts = append(parts, "gen – µs/msg")
		case !ok:
			parts = append(parts, m+" –")
		case m == "rss_per_conn":
			parts = append(parts, fmt.Sprintf(specMetrics[m], kib(v)))
		case m == "deliveries_per_s":
			parts = append(parts, fmt.Sprintf(specMetrics[m], rate(v)))
		case m == "redis_per_delivery":
			parts = append(parts, fmt.Sprintf(specMetrics[m], 1000*v))
		default:
			parts = append(parts, fmt.Sprintf(specMetrics[m], v))
		}
	}
	return strings.Join(parts, "; ")
}

// judge fills a step's target and verdict columns from the objectives
// that apply to it: met, MISSED, "–" when one could not be read (no
// deliveries, too few CPU ticks), each saying when the generator
// saturated.
func (sp *spec) judge(s *specStep) bool {
	var mine []slo.Objective
	var texts []string
	for _, o := range sp.objs {
		if o.Step == "" || o.Step == s.step.Name {
			mine = append(mine, o)
			texts = append(texts, strings.TrimPrefix(o.Text, o.Step+":")) // the row names its step
		}
	}
	if len(mine) == 0 {
		return true
	}
	s.row.Target = strings.Join(texts, ", ")
	verdicts := slo.Evaluate(mine, []slo.Step{{Name: s.step.Name, Figures: s.figures}})
	switch slo.Worst(verdicts) {
	case slo.Met:
		s.row.Verdict = verdict(true, s.row.Saturated)
		return true
	case slo.Missed:
		s.row.Verdict = verdict(false, s.row.Saturated)
		for _, v := range verdicts {
			if v.Verdict == slo.Missed {
				addNote(&s.row, v.Reason)
			}
		}
	default:
		s.row.Verdict = "–"
		for _, v := range verdicts {
			if v.Verdict == slo.Inconclusive {
				addNote(&s.row, v.SLO+" not judged: "+v.Metric+" not measured")
			}
		}
	}
	return false
}

// kneeRow sums up a sweep: the last step that met every objective.
func (sp *spec) kneeRow(done []specStep, stopped string, smoke bool) Result {
	k := sp.bench.Knee
	row := Result{Scenario: sp.expandVars(k.Row), Ratio: -1, Note: stopped}
	best := -1
	sat := false
	for i, s := range done {
		if s.met {
			best = i
		}
		sat = sat || s.row.Saturated
	}
	reach := -1
	for i, st := range sp.sc.Steps {
		if st.Name == k.Reach {
			reach = i
		}
	}
	if reach >= 0 {
		row.Target = "≥ " + sp.rowName(sp.sc.Steps[reach])
	}
	if best < 0 {
		row.Figure, row.Verdict = "none met the objectives", verdict(false, sat)
		return row
	}
	b := done[best]
	row.Clients, row.PerSecond, row.P50, row.P99, row.CPUPerDel, row.CPUNote = b.row.Clients, b.row.PerSecond, b.row.P50, b.row.P99, b.row.CPUPerDel, b.row.CPUNote
	row.Figure = sp.expand(k.Figure, b.step, map[string]string{"deliveries_per_s": rate(b.row.PerSecond)})
	if sat {
		row.Figure, row.Saturated = "≥ "+row.Figure+" (lower bound)", true
		addNote(&row, "the generator saturated: the server's knee lies at or above this step")
	}
	switch {
	case reach < 0:
		row.Verdict = "measured"
	case smoke && reach >= len(done):
		row.Verdict = "–"
		addNote(&row, "not judged at smoke size: the sweep does not reach its target step")
	default:
		row.Verdict = verdict(best >= reach, sat)
	}
	return row
}

// rowName is a step's row name: the file's row: with the step's fields.
func (sp *spec) rowName(st loadtest.Step) string {
	row := cmp.Or(sp.stepBench[st.Name].Row, sp.bench.Row)
	if row == "" {
		return sp.sc.Name + " " + st.Name
	}
	return sp.expand(row, st, nil)
}

// expand fills a template's placeholders with the step's fields and more.
func (sp *spec) expand(tmpl string, st loadtest.Step, more map[string]string) string {
	pairs := []string{"{name}", st.Name, "{planned}", rate(planned(st)), "{rooms}", itoa(st.Rooms), "{room_size}", itoa(st.RoomSize), "{clients}", itoa(st.Clients()),
		"{rooms_per_client}", itoa(st.RoomsPerClient), "{senders}", itoa(st.Senders), "{msg_size}", itoa(st.MsgSize)}
	for k, v := range more {
		pairs = append(pairs, "{"+k+"}", v)
	}
	for k, v := range sp.vars() {
		pairs = append(pairs, "{"+k+"}", v)
	}
	return strings.NewReplacer(pairs...).Replace(tmpl)
}

// measures are a step's measured placeholders for its note.
func measures(s results.StepMeta, rssBefore int64, row Result) map[string]string {
	return map[string]string{"joined": fmt.Sprint(s.Joined), "sent": fmt.Sprint(s.Sent), "deliveries": fmt.Sprint(s.ReceivedAll),
		"rss_before": mib(rssBefore), "rss_held": mib(row.RSS)}
}
