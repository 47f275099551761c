package report

import (
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/scalechat/scalechat/internal/results"
)

// LoadTargets reads a targets comparison (scalechat bench compare) from its
// folder or its targets.json; it reports false when path is neither.
func LoadTargets(path string) (*results.Targets, bool, error) {
	p := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		p = filepath.Join(path, results.TargetsJSON)
		if _, err := os.Stat(p); err != nil {
			return nil, false, nil
		}
	} else if filepath.Base(path) != results.TargetsJSON {
		return nil, false, nil
	}
	t, err := results.ReadTargets(p)
	return t, true, err
}

// targetCharts are the charts of a targets comparison.
var targetCharts = []Chart{
	{"targets_latency", "Latency percentiles per step, targets side by side",
		"p50, p90, p99 and max of the delivery latency (receive time minus the message's due time), one panel per step, a bar per target."},
	{"targets_cpu", "Server CPU per delivery",
		"CPU time (user + system) of the server process over the step's sending window, divided by the deliveries of that window, in µs."},
	{"targets_memory", "Server memory per connection",
		"Largest RSS of the server process during the step's sending window minus its RSS before the run, divided by the clients that joined, in KiB."},
	{"targets_throughput", "Deliveries per second",
		"Deliveries the load generator received per second of the sending window."},
}

// WriteTargets draws the comparison's charts into opts.Out and writes
// index.html there. It returns the charts written.
func WriteTargets(t *results.Targets, opts Options) ([]Chart, error) {
	steps, targets := targetAxes(t)
	if len(steps) == 0 {
		return nil, fmt.Errorf("the comparison has no measured step: nothing to draw")
	}
	draws := []func() error{func() error { return targetLatency(opts.Out, t, steps, targets) }}
	for i, m := range []struct {
		y   string
		get func(results.TargetRow) float64
		has func(results.TargetRow) bool
	}{
		{"µs of server CPU per delivery", func(r results.TargetRow) float64 { return r.CPUPerDelivery },
			func(r results.TargetRow) bool { return r.Measured() && r.CPUPerDelivery > 0 }},
		{"KiB of server RSS per connection", func(r results.TargetRow) float64 { return r.RSSPerConn / 1024 },
			results.TargetRow.MemoryMeasured},
		{"deliveries per second", func(r results.TargetRow) float64 { return r.PerSecond }, results.TargetRow.Measured},
	} {
		c := targetCharts[i+1]
		draws = append(draws, func() error { return targetBars(opts.Out, c.Name, c.Title, m.y, t, steps, targets, m.get, m.has) })
	}
	if err := build(opts.Out, draws, targetsTmpl, targetsPage(t)); err != nil {
		return nil, err
	}
	return targetCharts, nil
}

// targetAxes lists the measured steps and the targets, in run order; a
// target that could not run is there too, with no data in every step.
func targetAxes(t *results.Targets) (steps, targets []string) {
	for _, r := range t.Rows {
		if r.Step != "" && !slices.Contains(steps, r.Step) {
			steps = append(steps, r.Step)
		}
		if !slices.Contains(targets, r.Target) {
			targets = append(targets, r.Target)
		}
	}
	return steps, targets
}

func findRow(t *results.Targets, target, step string) (results.TargetRow, bool) {
	for _, r := range t.Rows {
		if r.Target == target && r.Step == step {
			return r, true
		}
	}
	return results.TargetRow{}, false
}

// barWidth fits n bars side by side in one unit of the x axis.
func barWidth(n int) vg.Length { return vg.Points(float64(min(90, 360/max(n, 1)))) }

// groupedBars adds to p one bar chart per series, side by side in every
// group (x position) under names, and sets the y axis from 0 with room for
// the legend. legend names the series; nil adds no legend.
func groupedBars(p *plot.Plot, names []string, series []plotter.Values, legend []string, w vg.Length) error {
	hi := 0.0
	for k, vals := range series {
		for _, v := range vals {
			hi = max(hi, v)
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color, b.LineStyle.Width = plotutil.Color(k), 0
		b.Offset = w * vg.Length(float64(k)-float64(len(series)-1)/2)
		p.Add(b)
		if legend != nil {
			p.Legend.Add(legend[k], b)
		}
	}
	nominal(p, names)
	p.Y.Min, p.Y.Max = 0, max(hi*1.2, 1e-3)
	return nil
}

// targetBars draws one figure: a group of bars per step, a bar per target;
// "no data" where a target's row is missing or has no value (has).
func targetBars(dir, name, title, y string, t *results.Targets, steps, targets []string,
	get func(results.TargetRow) float64, has func(results.TargetRow) bool) error {
	p := newPlot(title, "", y, false)
	series := make([]plotter.Values, len(targets))
	missing := make([][]float64, len(targets))
	for k, tg := range targets {
		series[k] = make(plotter.Values, len(steps))
		for i, s := range steps {
			if r, ok := findRow(t, tg, s); ok && has(r) {
				series[k][i] = get(r)
			} else {
				missing[k] = append(missing[k], float64(i))
			}
		}
	}
	w := barWidth(len(targets))
	if err := groupedBars(p, steps, series, targets, w); err != nil {
		return err
	}
	markNoData(p, missing, w)
	p.Y.Tick.Marker = countTicks{}
	return savePlot(dir, name, p)
}

// markNoData writes "no data" where a bar of series k at the x positions
// missing[k] would stand, bars of width w placed as groupedBars places
// them: a target that measured nothing is not an empty bar, which reads
// as a zero.
func markNoData(p *plot.Plot, missing [][]float64, w vg.Length) {
	for k, xs := range missing {
		if len(xs) > 0 {
			p.Add(noData{xs: xs, offset: w * vg.Length(float64(k)-float64(len(missing)-1)/2)})
		}
	}
}

// noData is a plotter that writes "no data", upright from the x axis, at
// each of xs shifted by offset.
type noData struct {
	xs     []float64
	offset vg.Length
}

// Plot implements plot.Plotter.
func (n noData) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := draw.TextStyle{Color: colorCut, Font: font.From(plot.DefaultFont, 14), Rotation: math.Pi / 2,
		XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler}
	for _, x := range n.xs {
		c.FillText(sty, vg.Point{X: trX(x) + n.offset, Y: trY(p.Y.Min) + vg.Points(6)}, "no data")
	}
}

// targetLatency draws a panel per step: bars p50, p90, p99, max, grouped,
// a bar per target in each group.
func targetLatency(dir string, t *results.Targets, steps, targets []string) error {
	cols := min(len(steps), 3)
	rows := (len(steps) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, s := range steps {
		p := newPlot(s, "", "latency (ms)", true)
		series := make([]plotter.Values, len(targets))
		missing := make([][]float64, len(targets))
		for k, tg := range targets {
			r, ok := findRow(t, tg, s)
			series[k] = plotter.Values{r.P50, r.P90, r.P99, r.Max}
			if !ok || !r.Measured() {
				missing[k] = []float64{0, 1, 2, 3}
			}
		}
		legend := targets
		if i > 0 {
			legend = nil // the first panel's legend names the targets
		}
		w := barWidth(len(targets)) / 2
		if err := groupedBars(p, []string{"p50", "p90", "p99", "max"}, series, legend, w); err != nil {
			return err
		}
		markNoData(p, missing, w)
		grid[i/cols][i%cols] = p
	}
	return saveGrid(dir, "targets_latency", "Delivery latency per step, targets side by side", grid)
}

// targetsData is the targets page's own content: the comparison, and its
// rows that measured nothing (warned of above the table).
type targetsData struct {
	*comparison
	Failed []results.TargetRow
}

// comparison names the embedded comparison so that its own Targets field,
// not the embedding, is what .Targets means in the template.
type comparison = results.Targets

func targetsPage(t *results.Targets) page {
	d := &targetsData{comparison: t}
	pg := page{Title: "scalechat bench compare: " + t.Scenario, Charts: targetCharts,
		Files: []string{results.TargetsCSV, results.TargetsJSON}, Data: d}
	for _, r := range t.Rows {
		if r.Failure() != "" {
			d.Failed = append(d.Failed, r)
		}
	}
	for _, r := range t.Rows {
		if r.Saturated {
			pg.Warnings = []string{"Warning: the load generator was saturated on the highlighted rows: their figures say more about the generator than about the server."}
			break
		}
	}
	pg.Warnings = append(pg.Warnings, sloWarnings(t.SLO)...)
	return pg
}

// targetsTmpl is the targets comparison page's parts. targetLat and
// perDelivery show "–" for a row that delivered nothing or whose CPU held too
// few clock ticks (its note says so), and memory per
// connection is "–" for a row that did not measure it: their zeros are no
// measurement.
var targetsTmpl = template.Must(template.Must(skeleton.Clone()).Funcs(template.FuncMap{
	"targetLat": func(r results.TargetRow, v float64) string {
		if !r.Measured() {
			return "–"
		}
		return fmtMs(v)
	},
	"perDelivery": func(r results.TargetRow, v float64) string {
		if !r.Measured() || r.CPUDeliveryTooFew {
			return "–"
		}
		return fmtNumber(v)
	},
}).Parse(sloParts + `{{define "top"}}{{template "slo" .SLO}}<p>The same steps against each target, one target after another on the same machine; each server alone, the
load generator on another core.</p>
<h2>Run</h2>
<dl><dt>scenario</dt><dd>{{.Scenario}}</dd><dt>targets</dt><dd>{{range $i, $t := .Targets}}{{if $i}}, {{end}}{{$t}}{{end}}</dd>
<dt>started</dt><dd>{{when .StartedAt}}</dd><dt>ended</dt><dd>{{when .EndedAt}}</dd><dt>pinning</dt><dd>{{.Pinning}}</dd>
<dt>load average</dt><dd>before {{.LoadBefore}}, after {{.LoadAfter}}</dd><dt>machine</dt><dd>{{.Machine}}</dd></dl>
{{end}}
{{define "bottom"}}<h2>Results</h2>
{{with .Failed}}<div class="warn" id="failed">Warning: {{len .}} row(s) measured nothing; their figures are not zeros but missing:
<ul>{{range .}}<li><b>{{.Target}}</b>{{with .Step}}, step {{.}}{{end}}: {{.Failure}}. {{.Note}}</li>{{end}}</ul></div>{{end}}
<div class="wide"><table id="targets">
<tr><th>target</th><th>protocol</th><th>step</th><th>clients</th><th>deliveries/s</th><th>delivery</th><th>unexpected</th><th>errors</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>server CPU µs/delivery</th><th>server memory/conn</th><th>generator CPU</th><th>note</th></tr>
{{range .Rows}}<tr{{if .Saturated}} class="saturated"{{end}}><td>{{.Target}}</td><td>{{.Protocol}}</td><td>{{.Step}}</td><td>{{count .Clients}}</td><td>{{num .PerSecond}}</td><td>{{pct .Ratio}}</td><td>{{count .Unexpected}}</td><td>{{count .Errors}}</td><td>{{targetLat . .P50}}</td><td>{{targetLat . .P90}}</td><td>{{targetLat . .P99}}</td><td>{{targetLat . .Max}}</td><td>{{perDelivery . .CPUPerDelivery}}</td><td>{{if .MemoryMeasured}}{{bytes .RSSPerConn}}{{else}}–{{end}}</td><td>{{pct .GeneratorCPU}}</td><td>{{.Note}}{{if and .Note .CPUNote}}; {{end}}{{.CPUNote}}</td></tr>
{{end}}</table></div>
{{end}}`))
