//go:build linux

package bench

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
)

// A benchmark file's rows: a step's row from its generators' runs, its
// figures, its verdict against the objectives, and the knee of a sweep.

// stepRow makes a step's row from its generators' runs, and judges it;
// metas are the steps that ran beside it, by name (during:).
func (sp *spec) stepRow(l launched, gens []*genRun, metas map[string]results.StepMeta) (specStep, error) {
	st, sb, cl := l.step, sp.stepBench[l.step.Name], l.view
	name := sp.rowName(st)
	row := mergedRow(name, gens, cl.nodes, cl.store, cl.nats, st.Duration.D())
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
	if cl.store != nil {
		addNote(&row, fmt.Sprintf("server CPU = the nodes (%s); %s apart; all on CPU %s", nodeLetters(len(cl.nodes)), cl.storeName(), l.cpus))
	}
	if len(gens) > 1 {
		addNote(&row, fmt.Sprintf("%d generators, shard i/%d → node %s", len(gens), len(gens), nodeLetters(len(gens))))
	}
	if sb.During != "" {
		if err := during(&row, gens, metas[sb.During]); err != nil {
			return specStep{}, err
		}
	}
	figs := specFigures(&row, pooled, cl.storeName(), l.before)
	if l.out >= 0 && pooled.ReceivedAll > 0 {
		figs["bytes_per_delivery"] = float64(l.out) / float64(pooled.ReceivedAll)
	}
	if cmp.Or(sb.Latency, sp.bench.Latency) == "connect" {
		row.P50, row.P99, row.Max = pooled.ConnectMs.P50, pooled.ConnectMs.P99, pooled.ConnectMs.Max
	}
	if cl.store == nil {
		row.cluster = nil // one server: no Redis or NATS figure in the results file
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
// which for a split run come from the events) and the bench's own; store
// is the cluster's store, "Redis" or "NATS" (its figures redis_… or
// nats_…), "" without one.
func specFigures(row *Result, pooled results.StepMeta, store string, rssBefore int64) map[string]float64 {
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
	if c := row.cluster; store != "" && c != nil && c.deliveries > 0 && c.storeCPU > 0 {
		us, note := perDelivery(c.storeCPU, c.deliveries)
		key := strings.ToLower(store)
		if note != "" {
			addNote(row, store+" "+note)
		} else {
			c.storeUS, f[key+"_per_delivery"] = us, us/1000 // slo keeps times in ms
			if us > 0 {
				// What one core of the store would carry at this cost:
				// the cluster's ceiling while it does work per delivery.
				f[key+"_core_deliveries"] = 1e6 / us
			}
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
		case !ok && (m == "redis_per_delivery" || m == "nats_per_delivery"):
			parts = append(parts, strings.Replace(specMetrics[m], "%.2f", "–", 1))
		case !ok && (m == "redis_core_deliveries" || m == "nats_core_deliveries"):
			parts = append(parts, strings.Replace(specMetrics[m], "%s", "–", 1))
		case !ok && m == "generator_per_message":
			parts = append(parts, "gen – µs/msg")
		case !ok:
			parts = append(parts, m+" –")
		case m == "rss_per_conn":
			parts = append(parts, fmt.Sprintf(specMetrics[m], kib(v)))
		case m == "deliveries_per_s" || m == "redis_core_deliveries" || m == "nats_core_deliveries":
			parts = append(parts, fmt.Sprintf(specMetrics[m], rate(v)))
		case m == "redis_per_delivery" || m == "nats_per_delivery":
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
		"{rooms_per_client}", itoa(st.RoomsPerClient), "{senders}", itoa(st.Senders), "{msg_size}", itoa(st.MsgSize),
		"{transport}", sp.transport(st)}
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
