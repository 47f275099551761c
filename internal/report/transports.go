package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/scalechat/scalechat/internal/results"
)

// TransportsInput is a transports comparison (scalechat bench transports):
// its rows and, when present, its transports.json.
type TransportsInput struct {
	Rows      []results.ComparisonRow
	Meta      *results.ComparisonMeta
	Malformed int
}

// LoadTransports reads a comparison from its folder or its transports.csv;
// it reports false when path is neither.
func LoadTransports(path string) (*TransportsInput, bool, error) {
	csvPath, jsonPath := path, ""
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		csvPath = filepath.Join(path, results.ComparisonCSV)
		if _, err := os.Stat(csvPath); err != nil {
			return nil, false, nil
		}
	} else if filepath.Base(path) != results.ComparisonCSV {
		return nil, false, nil
	}
	jsonPath = filepath.Join(filepath.Dir(csvPath), results.ComparisonJSON)
	rows, bad, err := results.ReadComparison(csvPath)
	if err != nil {
		return nil, true, err
	}
	in := &TransportsInput{Rows: rows, Malformed: bad}
	if _, err := os.Stat(jsonPath); err == nil {
		if in.Meta, err = results.ReadComparisonMeta(jsonPath); err != nil {
			return nil, true, err
		}
	}
	return in, true, nil
}

// transportCharts are the four charts of a comparison.
var transportCharts = []Chart{
	{"transports_errors", "Errors against clients",
		"Clients whose one message did not come back within the timeout (never joined, request failed, or too late), per transport."},
	{"transports_cpu", "Server CPU seconds against clients",
		"CPU time (user + system) of the server process over the whole run of the step: connect, send, wait, close."},
	{"transports_megabytes", "Megabytes on the wire against clients",
		"Bytes the server read and wrote (WebSocket frames and HTTP requests and answers, headers included), in MB (10^6 bytes)."},
	{"transports_p99", "p99 latency against clients",
		"99th percentile of the round trip of the messages that came back in time, from the instant each was due (log scale)."},
}

// WriteTransports draws the comparison's four charts into opts.Out and
// writes index.html there. It returns the charts written.
func WriteTransports(in *TransportsInput, opts Options) ([]Chart, error) {
	if len(in.Rows) == 0 {
		return nil, fmt.Errorf("the comparison has no rows: nothing to draw")
	}
	type metric struct {
		title, y string
		get      func(results.ComparisonRow) float64
		log      bool
	}
	metrics := []metric{
		{"Errors (message not back within the timeout)", "clients with an error", func(r results.ComparisonRow) float64 { return float64(r.Errors) }, false},
		{"Server CPU time", "CPU seconds", func(r results.ComparisonRow) float64 { return r.ServerCPU }, false},
		{"Bytes in + out at the server", "MB", func(r results.ComparisonRow) float64 { return float64(r.BytesIn+r.BytesOut) / 1e6 }, false},
		{"Round-trip latency p99 (log scale)", "p99 latency (ms, log scale)", func(r results.ComparisonRow) float64 { return r.P99 }, true},
	}
	var draws []func() error
	for i, m := range metrics {
		draws = append(draws, func() error {
			return transportPlot(opts.Out, transportCharts[i].Name, m.title, m.y, in.Rows, m.get, m.log)
		})
	}
	if err := build(opts.Out, draws, transportsTmpl, transportsPage(in)); err != nil {
		return nil, err
	}
	return transportCharts, nil
}

// transportPlot draws one metric against clients, a line per transport.
func transportPlot(dir, name, title, y string, rows []results.ComparisonRow, get func(results.ComparisonRow) float64, logY bool) error {
	p := newPlot(title, "clients (each sends one message)", y, false)
	if !logY {
		p.Y.Tick.Marker = countTicks{}
	}
	lo, hi := math.Inf(1), 0.0
	for k, t := range results.TransportNames {
		var xys plotter.XYs
		for _, r := range rows {
			if r.Transport != t {
				continue
			}
			v := get(r)
			if logY {
				if r.Received == 0 {
					continue // no latency to draw
				}
				v = max(v, floorLog)
			}
			xys = append(xys, plotter.XY{X: float64(r.Clients), Y: v})
			lo, hi = min(lo, v), max(hi, v)
		}
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		// Widest first, then narrower and dashed: transports with equal
		// figures (all zero errors, say) stay visible on top of each other.
		l.Color, l.Width, l.Dashes = plotutil.Color(k), lineWidths[k], lineDashes[k]
		pts.Color, pts.Shape, pts.Radius = plotutil.Color(k), plotutil.Shape(k), vg.Points(6)
		p.Add(l, pts)
		p.Legend.Add(t, l, pts)
	}
	switch {
	case logY && hi > 0:
		logAxis(&p.Y, lo/2, hi*3)
	case !logY:
		p.Y.Max = max(hi*1.2, 1)  // room for the legend
		p.Y.Min = -0.02 * p.Y.Max // a line at zero stays off the axis
	}
	p.X.Tick.Marker = countTicks{}
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(16), -vg.Points(10)
	return savePlot(dir, name, p)
}

var (
	lineWidths = []vg.Length{vg.Points(8), vg.Points(4.5), vg.Points(2)}
	lineDashes = [][]vg.Length{nil, {vg.Points(14), vg.Points(6)}, nil}
)

func transportsPage(in *TransportsInput) page {
	pg := page{Title: "scalechat transports: WebSocket vs long polling vs polling", Charts: transportCharts,
		Files: []string{results.ComparisonCSV, results.ComparisonJSON}, Data: in}
	for _, r := range in.Rows {
		if r.Saturated {
			pg.Warnings = []string{"Warning: the load generator was saturated on the highlighted rows: their figures say more about the generator than about the server."}
			break
		}
	}
	return pg
}

// transportsTmpl is the transports comparison page's parts.
var transportsTmpl = pageTemplate(`{{define "top"}}<p>For each number of clients, every client sends one message and waits for it to come back; a message not back
within the timeout is an error. Each transport runs against a freshly started server.</p>
{{with .Meta}}<h2>Run</h2>
<dl><dt>started</dt><dd>{{when .StartedAt}}</dd><dt>ended</dt><dd>{{when .EndedAt}}</dd>
<dt>timeout</dt><dd>{{.Timeout}}</dd><dt>long poll wait</dt><dd>{{.PollWait}}</dd><dt>poll interval</dt><dd>{{.PollEvery}}</dd>
<dt>message size</dt><dd>{{.MsgSize}} bytes</dd><dt>pinning</dt><dd>{{.Pinning}}</dd>
<dt>load average</dt><dd>before {{.LoadBefore}}, after {{.LoadAfter}}</dd><dt>machine</dt><dd>{{.Machine}}</dd>
{{if .Interrupted}}<dt>interrupted</dt><dd>yes: the results cover what ran</dd>{{end}}</dl>
{{range .Notes}}<p class="note">{{.}}</p>{{end}}{{end}}
{{end}}
{{define "bottom"}}<h2>Results</h2>
<div class="wide"><table id="transports">
<tr><th>transport</th><th>clients</th><th>sent</th><th>back in time</th><th>errors</th><th>timeouts</th><th>connect errors</th><th>request errors</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>server CPU (s)</th><th>in</th><th>out</th><th>saturated</th></tr>
{{range .Rows}}<tr{{if .Saturated}} class="saturated"{{end}}><td>{{.Transport}}</td><td>{{count .Clients}}</td><td>{{count .Sent}}</td><td>{{count .Received}}</td><td>{{count .Errors}}</td><td>{{count .Timeouts}}</td><td>{{count .ConnectErrors}}</td><td>{{count .RequestErrors}}</td><td>{{ms .P50}}</td><td>{{ms .P90}}</td><td>{{ms .P99}}</td><td>{{ms .Max}}</td><td>{{num .ServerCPU}}</td><td>{{bytes .BytesIn}}</td><td>{{bytes .BytesOut}}</td><td>{{if .Saturated}}YES{{else}}no{{end}}</td></tr>
{{end}}</table></div>
{{if .Malformed}}<p class="note">{{.Malformed}} malformed rows were skipped.</p>{{end}}
{{end}}`)
