package report

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/scalechat/scalechat/internal/results"
)

// ScalingInput is a results file of scalechat bench --json holding the
// scaling scenario's steps: servers of 1, 2, 4 … loops at rising load.
type ScalingInput struct {
	File  results.BenchFile
	Path  string
	Loops []int                      // the server sizes, ascending
	Steps map[int][]results.BenchRow // each size's steps, by load
}

// LoadScaling reads a results file of scalechat bench --json that holds
// the scaling scenario's rows; it reports false when path is no such file
// (a folder, another JSON file, or a bench file without scaling rows).
func LoadScaling(path string) (*ScalingInput, bool, error) {
	if !strings.HasSuffix(path, ".json") {
		return nil, false, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, nil
	}
	f, err := results.ParseBenchFile(path, b)
	if err != nil {
		return nil, false, nil
	}
	in := &ScalingInput{File: f, Path: path, Steps: map[int][]results.BenchRow{}}
	for _, r := range f.Rows {
		if r.Loops <= 0 || r.PerSecond <= 0 {
			continue
		}
		if _, ok := in.Steps[r.Loops]; !ok {
			in.Loops = append(in.Loops, r.Loops)
		}
		in.Steps[r.Loops] = append(in.Steps[r.Loops], r)
	}
	if len(in.Loops) == 0 {
		return nil, false, nil
	}
	slices.Sort(in.Loops)
	for _, k := range in.Loops {
		slices.SortStableFunc(in.Steps[k], func(a, b results.BenchRow) int { return cmp.Compare(a.PerSecond, b.PerSecond) })
	}
	return in, true, nil
}

// scalingCharts are the latency–throughput curve and the CPU curve.
var scalingCharts = []Chart{
	{"scaling_latency", "Latency against throughput",
		"p99 (solid) and p50 (dashed) of each step against the deliveries per second it carried, one colour per server size (event loops), both axes log scale: the knee is where a curve turns up."},
	{"scaling_cpu", "Server CPU per delivery against throughput",
		"µs of server CPU per delivery of each step against the deliveries per second it carried, one colour per server size: cost per delivery is a curve against load, not a constant."},
}

// WriteScaling draws the scaling scenario's curves into opts.Out and
// writes index.html there. It returns the charts written.
func WriteScaling(in *ScalingInput, opts Options) ([]Chart, error) {
	draws := []func() error{
		func() error { return scalingPlot(opts.Out, scalingCharts[0].Name, in, true) },
		func() error { return scalingPlot(opts.Out, scalingCharts[1].Name, in, false) },
	}
	pg := page{Title: "scalechat bench scaling: " + in.File.Host.String(), Charts: scalingCharts, Data: in,
		Files: []string{filepath.Base(in.Path)}}
	for _, k := range in.Loops {
		for _, r := range in.Steps[k] {
			if r.Saturated {
				pg.Warnings = append(pg.Warnings, fmt.Sprintf("%s: the generator saturated; that step's figures are lower bounds", r.Scenario))
			}
		}
	}
	if err := build(opts.Out, draws, scalingTmpl, pg); err != nil {
		return nil, err
	}
	return scalingCharts, nil
}

// scalingPlot draws one curve per server size: latency (p99 and p50) or
// CPU per delivery against deliveries per second.
func scalingPlot(dir, name string, in *ScalingInput, latency bool) error {
	title, y := "Server CPU per delivery against throughput", "µs of server CPU per delivery (log scale)"
	if latency {
		title, y = "Latency against throughput", "latency (ms, log scale)"
	}
	p := newPlot(title, "deliveries per second (log scale)", y, false)
	xlo, xhi, ylo, yhi := 1e18, 0.0, 1e18, 0.0
	for i, k := range in.Loops {
		series := []func(results.BenchRow) float64{func(r results.BenchRow) float64 { return r.CPUPerDel }}
		if latency {
			series = []func(results.BenchRow) float64{
				func(r results.BenchRow) float64 { return r.P99 },
				func(r results.BenchRow) float64 { return r.P50 },
			}
		}
		for j, get := range series {
			var xys plotter.XYs
			for _, r := range in.Steps[k] {
				if v := get(r); v > 0 {
					v = max(v, floorLog)
					xys = append(xys, plotter.XY{X: r.PerSecond, Y: v})
					xlo, xhi, ylo, yhi = min(xlo, r.PerSecond), max(xhi, r.PerSecond), min(ylo, v), max(yhi, v)
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			l.Color, l.Width, s.Color, s.Radius = plotutil.Color(i), vg.Points(3), plotutil.Color(i), vg.Points(5)
			if j == 1 {
				l.Dashes = []vg.Length{vg.Points(8), vg.Points(4)}
			}
			p.Add(l, s)
			if j == 0 {
				p.Legend.Add(fmt.Sprintf("%d loop%s", k, plural(k)), l)
			}
		}
	}
	if yhi == 0 {
		return fmt.Errorf("no step of %s measured %s", in.Path, map[bool]string{true: "a latency", false: "CPU per delivery"}[latency])
	}
	logAxis(&p.X, xlo/2, xhi*2)
	logAxis(&p.Y, ylo/2, yhi*3)
	p.Legend.Left = true
	return savePlot(dir, name, p)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// scalingTmpl is the scaling page's parts.
var scalingTmpl = pageTemplate(`{{define "top"}}<dl><dt>machine</dt><dd>{{.File.Host.String}}</dd>
<dt>measured</dt><dd>{{.File.Date}}, {{.File.Version}}{{if .File.ServerCPUs}}; server on CPU {{.File.ServerCPUs}}, generator on CPU {{.File.GeneratorCPUs}}{{end}}</dd>
<dt>command</dt><dd><code>{{.File.Command}}</code></dd></dl>
{{end}}
{{define "bottom"}}<h2>Steps</h2>
<div class="wide"><table id="steps">
<tr><th>step</th><th>loops</th><th>deliveries/s</th><th>delivery</th><th>p50</th><th>p99</th><th>µs/delivery</th><th>server CPU (s)</th><th>generator</th></tr>
{{range $k := .Loops}}{{range index $.Steps $k}}<tr{{if .Saturated}} class="saturated"{{end}}><td>{{.Scenario}}</td><td>{{.Loops}}</td><td>{{num .PerSecond}}</td><td>{{pct .Ratio}}</td><td>{{ms .P50}}</td><td>{{ms .P99}}</td><td>{{num .CPUPerDel}}</td><td>{{num .ServerCPU}}</td><td>{{.Figure}}{{if .Saturated}} (saturated){{end}}</td></tr>
{{end}}{{end}}</table></div>
{{end}}`)
