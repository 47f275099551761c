//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
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
	if sp.bench.RoundTrip > 0 {
		return r.runRoundTrips(ctx, sp, steps)
	}
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
	if sp.bench.Sweep != nil {
		return sp.sweepSteps(smoke)
	}
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
