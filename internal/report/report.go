// Package report turns the output of analyze into charts (PNG and SVG,
// drawn with gonum.org/v1/plot) and a self-contained index.html that opens
// offline.
package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// Options configure a report.
type Options struct {
	// Out is the folder written.
	Out string
	// LatencyCap cuts the y axis of the latency percentile panels.
	// Default 2 s.
	LatencyCap time.Duration
}

// Input is what a report is drawn from.
type Input struct {
	Summary *results.Summary
	Series  []results.SeriesPoint
	// Server holds the server metrics rows, if the run scraped any.
	Server []results.ServerRow
	// ServerMalformed counts the skipped rows of the server CSV.
	ServerMalformed int
}

// Chart is one figure of the report: Name.png and Name.svg.
type Chart struct {
	Name    string
	Title   string
	Caption string
}

// Load reads an analyze output folder: summary.json, timeseries.csv, and
// the server metrics CSV named in the summary or copied into the folder as
// server.csv.
func Load(dir string) (*Input, error) {
	sum, err := results.ReadSummary(filepath.Join(dir, results.SummaryJSON))
	if err != nil {
		return nil, err
	}
	series, err := results.ReadTimeseries(filepath.Join(dir, results.TimeseriesCSV))
	if err != nil {
		return nil, err
	}
	in := &Input{Summary: sum, Series: series}
	return in, in.loadServer(filepath.Join(dir, ServerCSV))
}

// ServerCSV is the server metrics file's name inside a report folder.
const ServerCSV = "server.csv"

// loadServer reads the server metrics copied into the folder (local), else
// those named in the summary; neither existing is not an error.
func (in *Input) loadServer(local string) error {
	path := ""
	for _, p := range []string{local, in.Summary.ServerMetrics} {
		if _, err := os.Stat(p); p != "" && err == nil {
			path = p
			break
		}
	}
	if path == "" {
		return nil
	}
	rows, bad, err := results.ReadServer(path)
	if err != nil {
		return fmt.Errorf("server metrics: %w", err)
	}
	in.Server, in.ServerMalformed = rows, bad
	return nil
}

// LoadServer reads the server metrics named in in.Summary, if any.
func (in *Input) LoadServer() error { return in.loadServer("") }

// Write draws every chart into opts.Out and writes index.html there. It
// returns the charts written.
func Write(in *Input, opts Options) ([]Chart, error) {
	if opts.LatencyCap <= 0 {
		opts.LatencyCap = 2 * time.Second
	}
	steps := in.Summary.Steps
	if len(steps) == 0 {
		return nil, fmt.Errorf("the analysis found no steps: nothing to draw")
	}
	capMs := float64(opts.LatencyCap) / float64(time.Millisecond)
	charts := []Chart{
		{"latency_percentiles", "Latency percentiles per step",
			fmt.Sprintf("Per-delivery latency p10 … p90, p95, p99, one panel per step; the y axis is cut at %s (red bars are cut and labelled with their value).", fmtMs(capMs))},
		{"percentiles_by_step", "p50 / p90 / p99 per step", "On a log scale, so that the step where latency breaks away stands out."},
		{"mean_stddev", "Mean ± standard deviation per step", "Mean per-delivery latency with one standard deviation either side."},
		{"sent_received", "Sent vs received per step", "Messages sent; deliveries expected (members of the room at the due time) and received."},
		{"deliveries_over_time", "Deliveries per second over time", "Within each step, per interval of the analysis."},
		{"p99_over_time", "p99 latency over time", "Within each step, per interval (log scale)."},
	}
	steps = slices.Clone(steps)
	draws := []func() error{
		func() error { return latencyPanels(opts.Out, steps, capMs) },
		func() error { return percentilesByStep(opts.Out, steps) },
		func() error { return meanStddev(opts.Out, steps) },
		func() error { return sentReceived(opts.Out, steps) },
		func() error { return overTime(opts.Out, steps, in.Series) },
	}
	if len(in.Series) == 0 {
		charts = charts[:4]
		draws = draws[:4]
	}
	if len(in.Server) > 0 {
		charts = append(charts,
			Chart{"server_cpu", "Server CPU", "CPU time per second of wall time, per node (100% = one core)."},
			Chart{"server_memory", "Server memory", "Resident set size per node."},
			Chart{"server_processing", "Server processing time", "Message processing time p50 (solid) and p99 (dashed) per node, per second."})
		draws = append(draws, func() error { return serverCharts(opts.Out, in.Server) })
	}
	if err := build(opts.Out, draws, runTmpl, runPage(in, charts)); err != nil {
		return nil, err
	}
	return charts, nil
}

// runData is the run page's own content.
type runData struct {
	Summary   *results.Summary
	Steps     []results.StepStats
	Overall   results.StepStats
	Run       []field // meta.json's members but the machine and the steps
	Machine   []field
	Scenario  scenario
	Malformed int // server metrics rows skipped
	// Explore is the time series for the interactive chart.
	Explore []exploreSeries
}

// scenario is every field the load test wrote per step: a row per field, a
// column per step (forty fields read down a page, not across it).
type scenario struct {
	Steps []string
	Rows  []scenarioRow
}

type scenarioRow struct {
	Key   string
	Cells []template.HTML
}

// runPage is the page of a run.
func runPage(in *Input, charts []Chart) page {
	s := in.Summary
	d := runData{Summary: s, Steps: s.Steps, Overall: s.Overall, Malformed: in.ServerMalformed, Explore: exploreData(s.Steps, in.Series)}
	pg := page{Title: "scalechat load-test report", Charts: charts, Data: &d,
		Files: []string{results.SummaryCSV, results.SummaryJSON, results.TimeseriesCSV, ServerCSV},
		Note:  "Inputs: " + strings.Join(s.Inputs, " ") + "."}
	for _, st := range s.Steps {
		if st.Saturated {
			w := "Warning: step " + st.Step + ": the load generator was saturated"
			if st.SaturationReason != "" {
				w += " (" + st.SaturationReason + ")"
			}
			pg.Warnings = append(pg.Warnings, w+". Its latencies say more about the generator than about the server.")
		}
	}
	if s.Meta != nil {
		d.Run, d.Machine, d.Scenario = metaSections(s.Meta)
	}
	return pg
}

// metaSections splits meta.json into the run's fields, the machine's and
// the steps' (as a scenario table). Empty fields are left out of the run.
func metaSections(m *results.Meta) (run, machine []field, sc scenario) {
	all, err := fieldsOf(m)
	if err != nil {
		return nil, nil, sc // a Meta always encodes
	}
	for _, f := range all {
		switch f.Key {
		case "machine":
			machine, _ = f.Val.([]field)
		case "steps":
		default:
			if !emptyValue(f.Val) {
				run = append(run, f)
			}
		}
	}
	var rows []scenarioRow
	index := map[string]int{}
	for i, ms := range m.Steps {
		sc.Steps = append(sc.Steps, ms.Name)
		fs, _ := fieldsOf(ms)
		for _, f := range fs {
			if f.Key == "name" {
				continue
			}
			k, ok := index[f.Key]
			if !ok {
				k = len(rows)
				index[f.Key] = k
				rows = append(rows, scenarioRow{Key: f.Key, Cells: make([]template.HTML, len(m.Steps))})
			}
			rows[k].Cells[i] = valueHTML(f.Key, f.Val)
		}
	}
	sc.Rows = rows
	return run, machine, sc
}

// emptyValue reports a JSON value that says nothing: "", 0, false, [] or a
// zero time.
func emptyValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == "" || v == "0001-01-01T00:00:00Z"
	case []any:
		return len(v) == 0
	case bool:
		return !v
	case json.Number:
		return v.String() == "0"
	}
	return false
}

// runTmpl is the run page's parts.
var runTmpl = pageTemplate(`{{define "top"}}<h2>Summary</h2>
<div class="wide"><table id="summary">
<tr><th>step</th><th>clients</th><th>rooms</th><th>sent</th><th>expected</th><th>received</th><th>lost</th><th>delivery ratio</th><th>orphans</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>mean</th><th>stddev</th><th>saturated</th></tr>
{{range .Steps}}<tr{{if .Saturated}} class="saturated"{{end}}><td>{{.Step}}</td>{{template "stepCells" .}}</tr>
{{end}}{{with .Overall}}<tr><td><b>all</b></td>{{template "stepCells" .}}</tr>{{end}}
</table></div>
<p class="note">Latency = receive time − the message's due time (open-loop schedule). {{.Summary.Histogram}}.
{{if .Summary.Malformed}} {{.Summary.Malformed}} malformed rows were skipped.{{end}}
{{range .Summary.Truncated}} {{.}} ended with a partial line (skipped).{{end}}
{{if .Malformed}} {{.Malformed}} malformed server metrics rows were skipped.{{end}}</p>
{{if .Run}}<h2>Run</h2>
<dl>{{range .Run}}<dt>{{.Key}}</dt><dd>{{value .Key .Val}}</dd>{{end}}</dl>{{end}}
{{if .Machine}}<h2>Machine</h2>
<dl>{{range .Machine}}<dt>{{.Key}}</dt><dd>{{value .Key .Val}}</dd>{{end}}</dl>{{end}}
{{with .Scenario}}{{if .Rows}}<h2>Scenario</h2>
<div class="wide"><table id="scenario"><tr><th>step</th>{{range .Steps}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><th>{{.Key}}</th>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}{{end}}
{{if .Explore}}<h2>Explore</h2>
<p class="note">Every step over the run's time: hover for the values at an instant, drag across the chart to zoom into
that span, double-click for the whole run. The PNG and SVG charts below are the same figures for slides.</p>
<div id="explore-metric"><button data-metric="rate">deliveries / s</button><button data-metric="p99">p99 latency</button></div>
<div id="explore"></div>
<script type="application/json" id="explore-data">{{.Explore}}</script>
<script>{{explore}}</script>{{end}}
{{end}}
{{define "stepCells"}}<td>{{count .Clients}}</td><td>{{count .Rooms}}</td><td>{{count .Sent}}</td><td>{{count .Expected}}</td><td>{{count .Received}}</td><td>{{count .Lost}}</td><td>{{pct .DeliveryRatio}}</td><td>{{count .Orphans}}</td><td>{{lat . .P50}}</td><td>{{lat . .P90}}</td><td>{{lat . .P99}}</td><td>{{lat . .P999}}</td><td>{{lat . .Max}}</td><td>{{lat . .Mean}}</td><td>{{lat . .Stddev}}</td><td>{{if .Saturated}}YES{{else}}no{{end}}</td>{{end}}`)
