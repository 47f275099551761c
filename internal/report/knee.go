package report

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/scalechat/scalechat/internal/results"
)

// KneeInput is a knee search (scalechat loadtest --find): its knee file.
type KneeInput struct {
	Knee *results.Knee
	Path string // the knee file
}

// LoadKnee reads a knee search from its <out>.knee.json, or from a folder
// holding exactly one such file; it reports false when path is neither.
func LoadKnee(path string) (*KneeInput, bool, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		m, _ := filepath.Glob(filepath.Join(path, "*.knee.json"))
		if len(m) != 1 {
			return nil, false, nil
		}
		file = m[0]
	} else if !strings.HasSuffix(path, ".knee.json") {
		return nil, false, nil
	}
	k, err := results.ReadKnee(file)
	if err != nil {
		return nil, true, err
	}
	return &KneeInput{Knee: k, Path: file}, true, nil
}

// kneeCharts are the two charts of a knee search.
var kneeCharts = []Chart{
	{"knee_latency", "Latency against load",
		"p50 and p99 of each probe against its load (log scale); the dashed line marks the knee, the highest load that met the SLOs; red points missed them, grey ones were inconclusive."},
	{"knee_delivery", "Delivery against load",
		"Deliveries received ÷ expected of each probe against its load; the dashed line marks the knee."},
}

// WriteKnee draws the knee search's charts into opts.Out and writes
// index.html there. It returns the charts written.
func WriteKnee(in *KneeInput, opts Options) ([]Chart, error) {
	k := in.Knee
	if len(k.Probes) == 0 {
		return nil, fmt.Errorf("the search ran no probe: nothing to draw")
	}
	draws := []func() error{
		func() error { return kneePlot(opts.Out, kneeCharts[0].Name, k, true) },
		func() error { return kneePlot(opts.Out, kneeCharts[1].Name, k, false) },
	}
	pg := page{Title: "scalechat: how far can it go? (" + k.Dimension + ")", Charts: kneeCharts, Data: k,
		Files: []string{filepath.Base(in.Path)}}
	if k.LimitKind == "generator" {
		pg.Warnings = []string{"The load generator saturated: " + k.Answer}
	}
	if err := build(opts.Out, draws, kneeTmpl, pg); err != nil {
		return nil, err
	}
	return kneeCharts, nil
}

var colorGrey = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}

// kneePlot draws the probes' latency (p50, p99) or delivery against load,
// coloured by verdict, with the knee marked.
func kneePlot(dir, name string, k *results.Knee, latency bool) error {
	title, y := "Delivery against load", "delivered (% of expected)"
	if latency {
		title, y = "Latency against load (log scale)", "latency (ms, log scale)"
	}
	p := newPlot(title, k.Dimension+" ("+k.Unit+")", y, false)
	var series [][2]any
	if latency {
		series = [][2]any{{"p99", func(pr results.Probe) float64 { return pr.P99 }}, {"p50", func(pr results.Probe) float64 { return pr.P50 }}}
	} else {
		series = [][2]any{{"delivery", func(pr results.Probe) float64 { return 100 * pr.Delivery }}}
	}
	lo, hi := 1e18, 0.0
	for i, s := range series {
		get := s[1].(func(results.Probe) float64)
		var xys plotter.XYs
		for _, pr := range sortedProbes(k.Probes) {
			v := get(pr)
			if latency {
				if pr.Sent == 0 || v <= 0 {
					continue
				}
				v = max(v, floorLog)
			}
			xys = append(xys, plotter.XY{X: pr.Load, Y: v})
			lo, hi = min(lo, v), max(hi, v)
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = colorMain, vg.Points(3)
		if i == 1 {
			l.Color, l.Dashes = colorAlt, []vg.Length{vg.Points(8), vg.Points(4)}
		}
		p.Add(l)
		p.Legend.Add(s[0].(string), l)
		for _, pr := range sortedProbes(k.Probes) {
			v := get(pr)
			if latency && (pr.Sent == 0 || v <= 0) {
				continue
			}
			if latency {
				v = max(v, floorLog)
			}
			sc, err := plotter.NewScatter(plotter.XYs{{X: pr.Load, Y: v}})
			if err != nil {
				return err
			}
			sc.Color, sc.Shape, sc.Radius = verdictColor(pr.Verdict), draw.CircleGlyph{}, vg.Points(7)
			p.Add(sc)
		}
	}
	if latency && hi > 0 {
		logAxis(&p.Y, lo/2, hi*3)
	} else if !latency {
		p.Y.Min, p.Y.Max = min(lo-5, 90), 102
	}
	if k.Knee > 0 {
		ymin, ymax := p.Y.Min, p.Y.Max
		kl, err := plotter.NewLine(plotter.XYs{{X: k.Knee, Y: ymin}, {X: k.Knee, Y: ymax}})
		if err != nil {
			return err
		}
		kl.Color, kl.Width, kl.Dashes = colorOK, vg.Points(3), []vg.Length{vg.Points(12), vg.Points(6)}
		p.Add(kl)
		p.Legend.Add(fmt.Sprintf("knee: %g %s", k.Knee, k.Unit), kl)
	}
	p.X.Min = 0
	p.Legend.Left = true
	return savePlot(dir, name, p)
}

// sortedProbes returns the probes by load.
func sortedProbes(ps []results.Probe) []results.Probe {
	out := append([]results.Probe(nil), ps...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Load < out[j-1].Load; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func verdictColor(v string) color.Color {
	switch v {
	case "met":
		return colorOK
	case "missed":
		return colorCut
	}
	return colorGrey
}

// kneeTmpl is the knee search page's parts.
var kneeTmpl = pageTemplate(`{{define "top"}}<p><b>{{.Answer}}</b></p>
<dl><dt>searched</dt><dd>{{.Dimension}} ({{.Unit}}) from {{num .Start}} up to {{num .Max}}, to within {{pct .Resolution}}</dd>
<dt>SLOs</dt><dd>{{range $i, $s := .SLO}}{{if $i}}, {{end}}{{$s}}{{end}}</dd>
<dt>knee</dt><dd>{{if .Knee}}{{num .Knee}} {{.Unit}}{{else}}none met the SLOs{{end}}</dd>
{{if .Above}}<dt>first miss</dt><dd>{{num .Above}} {{.Unit}}</dd>{{end}}
{{if .Limit}}<dt>first limit</dt><dd>{{.LimitKind}}: {{.Limit}}</dd>{{end}}
<dt>stopped</dt><dd>{{.Stop}}</dd></dl>
{{end}}
{{define "bottom"}}<h2>Probes</h2>
<div class="wide"><table id="probes">
<tr><th>probe</th><th>load</th><th>sent</th><th>delivery</th><th>p50</th><th>p99</th><th>rate limited</th><th>errors</th><th>server CPU (cores)</th><th>verdict</th><th>SLOs</th></tr>
{{range .Probes}}<tr{{if ne .Verdict "met"}} class="saturated"{{end}}><td>{{.Step}}</td><td>{{num .Load}}</td><td>{{count .Sent}}</td><td>{{pct .Delivery}}</td><td>{{ms .P50}}</td><td>{{ms .P99}}</td><td>{{count .Refused}}</td><td>{{count .Errors}}</td><td>{{if .ServerCPU}}{{num .ServerCPU}}{{else}}–{{end}}</td><td>{{.Verdict}}{{with .Saturated}} (generator saturated: {{.}}){{end}}</td><td>{{range .SLO}}{{.SLO}}: {{.Value}} {{.Verdict}}<br>{{end}}{{range .Failures}}{{.}}<br>{{end}}</td></tr>
{{end}}</table></div>
<p class="note">Each probe is a load test step of its own (its meta.json beside the knee file, named in the knee file); analyze and report read it as any run.</p>
{{end}}`)
