//go:build linux

package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/scalechat/scalechat/internal/loadtest"
)

// With --repeat, a benchmark file sums up its runs: the machine is
// shared, so one run's figures swing, their medians much less.

// stepRuns are one step's rows over the runs.
type stepRuns struct {
	step string
	rows []Result
}

// medians are a row per step, "ROW: median of N", each of its figures the
// median over the runs that measured it, judged against its objectives
// and with its on: figures as one run is; then the figures: rows of those
// medians. Each row's note lists the runs' figures.
func (sp *spec) medians(runs [][]Result) []Result {
	var order []*stepRuns
	for _, rows := range runs {
		for _, row := range rows {
			if row.step == "" {
				continue
			}
			i := slices.IndexFunc(order, func(s *stepRuns) bool { return s.step == row.step && s.rows[0].Scenario == row.Scenario })
			if i < 0 {
				order = append(order, &stepRuns{step: row.step})
				i = len(order) - 1
			}
			order[i].rows = append(order[i].rows, row)
		}
	}
	done := make([]specStep, len(order))
	for i, s := range order {
		done[i] = specStep{step: loadtest.Step{Name: s.step}, figures: medianFigures(s.rows)}
	}
	var out []Result
	for i, s := range order {
		out = append(out, sp.medianRow(s, &done[i], done))
	}
	for _, f := range sp.bench.Figures {
		if f.On == "" {
			row := figureRow(f, done)
			row.Scenario = fmt.Sprintf("%s: median of %d", sp.expandVars(row.Scenario), len(runs))
			out = append(out, row)
		}
	}
	return out
}

// medianRow is one step's row of medians.
func (sp *spec) medianRow(s *stepRuns, med *specStep, done []specStep) Result {
	row := Result{Scenario: fmt.Sprintf("%s: median of %d", s.rows[0].Scenario, len(s.rows)), Ratio: -1}
	var figures []string
	for _, r := range s.rows {
		row.Saturated = row.Saturated || r.Saturated
		figures = append(figures, dash(r.Figure))
		if r.CPUNote != "" && row.CPUNote == "" {
			row.CPUNote = r.CPUNote
		}
	}
	if v := med.figures["cpu_per_delivery"]; v > 0 {
		row.CPUPerDel, row.CPUNote = 1000*v, ""
	}
	sb := sp.stepBench[s.step]
	figure := sb.Figure
	if figure == nil {
		figure = sp.bench.Figure
	}
	row.Figure = figureColumn(figure, med.figures, row)
	med.row = row
	sp.judge(med)
	row = med.row
	for _, f := range sp.bench.Figures {
		if f.On == s.step {
			onRow(&row, figureRow(f, done))
		}
	}
	addNote(&row, "runs: "+strings.Join(figures, " | "))
	return row
}

// medianFigures are each figure's median over the rows that measured it.
func medianFigures(rows []Result) map[string]float64 {
	all := map[string][]float64{}
	for _, r := range rows {
		for m, v := range r.figs {
			if v > 0 {
				all[m] = append(all[m], v)
			}
		}
	}
	out := map[string]float64{}
	for m, v := range all {
		out[m] = median(v)
	}
	return out
}
