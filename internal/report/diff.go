package report

import (
	"fmt"
	"html/template"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/scalechat/scalechat/internal/results"
)

// LoadDiff reads a diff (scalechat diff --out DIR or --json FILE) from its
// folder or its diff.json; it reports false when path is neither.
func LoadDiff(path string) (*results.Diff, bool, error) {
	p := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		p = filepath.Join(path, results.DiffJSON)
		if _, err := os.Stat(p); err != nil {
			return nil, false, nil
		}
	} else if filepath.Base(path) != results.DiffJSON {
		return nil, false, nil
	}
	d, err := results.ReadDiff(p)
	return d, true, err
}

var diffCharts = []Chart{{"diff", "A against B per step",
	"One panel per metric, a group of bars per step: A (the baseline) and B; the whisker on B's bar is the confidence interval of the change, drawn around A's figure. Delivery in %, latencies in ms, server CPU in µs per delivery; \"no data\" where a side did not measure the metric."}}

// WriteDiff draws the diff's chart into opts.Out and writes index.html
// there. It returns the charts written.
func WriteDiff(d *results.Diff, opts Options) ([]Chart, error) {
	if len(d.Steps) == 0 {
		return nil, fmt.Errorf("the diff compared no step: nothing to draw")
	}
	draw := func() error { return diffChart(opts.Out, d) }
	pg := page{Title: "scalechat diff: " + d.Verdict, Warnings: d.Warnings, Charts: diffCharts,
		Files: []string{results.DiffJSON}, Data: d}
	if err := build(opts.Out, []func() error{draw}, diffTmpl, pg); err != nil {
		return nil, err
	}
	return diffCharts, nil
}

// diffChart draws a panel per metric: for each step the bars of A and B
// and B's interval.
func diffChart(dir string, d *results.Diff) error {
	var metrics []string
	for _, s := range d.Steps {
		for _, m := range s.Metrics {
			if !contains(metrics, m.Metric) {
				metrics = append(metrics, m.Metric)
			}
		}
	}
	steps := make([]string, len(d.Steps))
	for i, s := range d.Steps {
		steps[i] = s.Step
	}
	cols := min(len(metrics), 3)
	grid := make([][]*plot.Plot, (len(metrics)+cols-1)/cols)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	w := barWidth(2) / 2
	for k, name := range metrics {
		series := []plotter.Values{make(plotter.Values, len(steps)), make(plotter.Values, len(steps))}
		missing := make([][]float64, 2)
		var iv intervals
		unit := ""
		for i, s := range d.Steps {
			m, ok := findMetric(s, name)
			unit = diffUnit(m)
			for side, v := range []*float64{m.A, m.B} {
				if !ok || v == nil {
					missing[side] = append(missing[side], float64(i))
					continue
				}
				series[side][i] = diffScaled(m, *v)
			}
			if ok && m.A != nil && m.Low != nil {
				lo, hi := around(m, *m.A, *m.Low), around(m, *m.A, *m.High)
				iv.xs, iv.lo, iv.hi = append(iv.xs, float64(i)), append(iv.lo, lo), append(iv.hi, hi)
				series[1][i] = max(series[1][i], 0)
			}
		}
		p := newPlot(name, "", unit, true)
		legend := []string{"A", "B"}
		if k > 0 {
			legend = nil
		}
		if err := groupedBars(p, steps, series, legend, w); err != nil {
			return err
		}
		for _, h := range iv.hi {
			p.Y.Max = max(p.Y.Max, h*1.1)
		}
		iv.offset = w / 2
		p.Add(iv)
		markNoData(p, missing, w)
		grid[k/cols][k%cols] = p
	}
	return saveGrid(dir, "diff", "A (baseline) against B, per step, with B's interval", grid)
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func findMetric(s results.StepDiff, name string) (results.MetricDiff, bool) {
	for _, m := range s.Metrics {
		if m.Metric == name {
			return m, true
		}
	}
	return results.MetricDiff{}, false
}

func diffUnit(m results.MetricDiff) string {
	if m.Unit == "ratio" {
		return "%"
	}
	return m.Unit
}

// diffScaled returns a figure in the unit diffUnit names.
func diffScaled(m results.MetricDiff, v float64) float64 {
	if m.Unit == "ratio" {
		return v * 100
	}
	return v
}

// around returns the figure B would have with change c against A's a.
func around(m results.MetricDiff, a, c float64) float64 {
	if m.ChangeUnit == "pp" {
		return a*100 + c
	}
	return a * (1 + c/100)
}

// intervals is a plotter of vertical whiskers from lo to hi at xs, shifted
// by offset (onto B's bar).
type intervals struct {
	xs, lo, hi []float64
	offset     vg.Length
}

// Plot implements plot.Plotter.
func (iv intervals) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := draw.LineStyle{Color: color.Black, Width: vg.Points(2)}
	capW := vg.Points(6)
	for i, x := range iv.xs {
		cx := trX(x) + iv.offset
		lo, hi := trY(max(iv.lo[i], p.Y.Min)), trY(min(iv.hi[i], p.Y.Max))
		c.StrokeLine2(sty, cx, lo, cx, hi)
		c.StrokeLine2(sty, cx-capW, lo, cx+capW, lo)
		c.StrokeLine2(sty, cx-capW, hi, cx+capW, hi)
	}
}

var diffTmpl = template.Must(template.Must(skeleton.Clone()).Funcs(diffFuncs).Parse(`{{define "top"}}<p>Run A (the baseline) against run B, step by step. Each change has a {{printf "%.0f" (pct100 .Confidence)}} % interval from
{{.Resamples}} bootstrap resamples (seed {{.Seed}}) that draw runs, then each run's windows, with replacement. A metric
regressed when its whole interval lies beyond its threshold on the side where it gets worse.</p>
<dl><dt>A</dt><dd>{{range .A}}{{.}} {{end}}</dd><dt>B</dt><dd>{{range .B}}{{.}} {{end}}</dd>
{{with .Gate}}<dt>gate</dt><dd>--fail-on {{.}}</dd>{{end}}
<dt>verdict</dt><dd id="verdict"><b>{{.Verdict}}</b>{{range .Reasons}}<br>{{.}}{{end}}</dd>
{{with .OnlyA}}<dt>only in A</dt><dd>{{range .}}{{.}} {{end}}</dd>{{end}}{{with .OnlyB}}<dt>only in B</dt><dd>{{range .}}{{.}} {{end}}</dd>{{end}}</dl>
{{end}}
{{define "bottom"}}<h2>Results</h2>
<div class="wide"><table id="diff">
<tr><th>step</th><th>metric</th><th>A</th><th>B</th><th>change</th><th>interval</th><th>threshold</th><th>verdict</th></tr>
{{range $s := .Steps}}{{range .Metrics}}<tr{{if eq .Verdict "regressed"}} class="saturated"{{end}}><td>{{$s.Step}}</td><td>{{.Metric}}</td><td>{{fig . .A}}</td><td>{{fig . .B}}</td><td>{{chg .Change .ChangeUnit}}</td><td>{{if .Low}}[{{chg .Low .ChangeUnit}}, {{chg .High .ChangeUnit}}]{{else}}–{{end}}</td><td>{{printf "%+g" .Threshold}} {{.ChangeUnit}}{{if .Gated}} (gate){{end}}</td><td>{{.Verdict}}{{with .Note}}: {{.}}{{end}}</td></tr>
{{end}}{{end}}</table></div>
{{end}}`))

// diffFuncs format the diff page's figures.
var diffFuncs = template.FuncMap{
	"pct100": func(v float64) float64 { return v * 100 },
	// fig shows "–" for a figure a side did not measure: not 0.
	"fig": func(m results.MetricDiff, v *float64) string { return m.FigureText(v, fmtMs) },
	"chg": results.ChangeText,
}
