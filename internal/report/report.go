// Package report turns the output of analyze into charts (PNG and SVG,
// drawn with gonum.org/v1/plot) and a self-contained index.html that opens
// offline.
package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/analyze"
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
	Summary *analyze.Result
	Series  []analyze.SeriesPoint
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
	sum, err := analyze.ReadSummary(filepath.Join(dir, analyze.SummaryJSON))
	if err != nil {
		return nil, err
	}
	series, err := analyze.ReadTimeseries(filepath.Join(dir, analyze.TimeseriesCSV))
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
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
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
	for _, d := range draws {
		if err := d(); err != nil {
			return nil, fmt.Errorf("draw: %w", err)
		}
	}
	f, err := os.Create(filepath.Join(opts.Out, "index.html"))
	if err != nil {
		return nil, err
	}
	if err := writeHTML(f, in, charts, opts); err != nil {
		f.Close()
		return nil, err
	}
	return charts, f.Close()
}

type kv struct{ K, V string }

type page struct {
	Title     string
	Generated string
	Summary   *analyze.Result
	Steps     []analyze.StepStats
	Overall   analyze.StepStats
	Saturated []analyze.StepStats
	Charts    []Chart
	Run       []kv
	Machine   []kv
	Scenario  struct {
		Cols []string
		Rows [][]string
	}
	Files           []string
	ServerMalformed int
	Cap             string
}

func writeHTML(w io.Writer, in *Input, charts []Chart, opts Options) error {
	s := in.Summary
	pg := page{Title: "scalechat load-test report", Generated: time.Now().UTC().Format(time.RFC3339),
		Summary: s, Steps: s.Steps, Overall: s.Overall, Charts: charts, ServerMalformed: in.ServerMalformed,
		Cap: fmtMs(float64(opts.LatencyCap) / float64(time.Millisecond))}
	for _, st := range s.Steps {
		if st.Saturated {
			pg.Saturated = append(pg.Saturated, st)
		}
	}
	if m := s.Meta; m != nil {
		add := func(k, v string) {
			if v != "" {
				pg.Run = append(pg.Run, kv{k, v})
			}
		}
		add("tool", strings.TrimSpace(m.Tool+" "+m.Version))
		add("started", timeString(m.StartedAt))
		add("ended", timeString(m.EndedAt))
		add("arguments", strings.Join(m.Args, " "))
		machine := jsonFields(m.Machine)
		keys := make([]string, 0, len(machine))
		for k := range machine {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			pg.Machine = append(pg.Machine, kv{k, fmt.Sprint(machine[k])})
		}
		// Scenario: every field the loadtest wrote per step.
		seen := map[string]bool{}
		steps := make([]map[string]any, len(m.Steps))
		for i, ms := range m.Steps {
			steps[i] = jsonFields(ms)
			for k := range steps[i] {
				if !seen[k] && k != "name" {
					seen[k] = true
					pg.Scenario.Cols = append(pg.Scenario.Cols, k)
				}
			}
		}
		slices.Sort(pg.Scenario.Cols)
		pg.Scenario.Cols = append([]string{"name"}, pg.Scenario.Cols...)
		for i, ms := range m.Steps {
			row := []string{ms.Name}
			for _, c := range pg.Scenario.Cols[1:] {
				v, ok := steps[i][c]
				if !ok {
					row = append(row, "")
					continue
				}
				row = append(row, fmt.Sprint(v))
			}
			pg.Scenario.Rows = append(pg.Scenario.Rows, row)
		}
	}
	for _, f := range []string{analyze.SummaryCSV, analyze.SummaryJSON, analyze.TimeseriesCSV, ServerCSV} {
		if _, err := os.Stat(filepath.Join(opts.Out, f)); err == nil {
			pg.Files = append(pg.Files, f)
		}
	}
	return pageTmpl.Execute(w, pg)
}

// jsonFields returns the fields of v as its JSON encoding names them.
func jsonFields(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// timeString formats t as RFC 3339, or "" when it is zero.
func timeString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

// pageCSS styles every page the report writes.
const pageCSS = `
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1700px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.8rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.95rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
tr.saturated td { background: #fde2e2; }
.warn { background: #fde2e2; border: 2px solid #d62728; padding: 0.8rem 1rem; margin: 1rem 0; font-weight: bold; }
figure { margin: 2rem 0; } figure img { width: 100%; max-width: 1600px; height: auto; border: 1px solid #ddd; }
figcaption { margin-top: 0.4rem; } dl { display: grid; grid-template-columns: max-content auto; gap: 0.2rem 1rem; }
dt { font-weight: bold; } .note { color: #555; font-size: 0.9rem; }
`

func css() template.CSS { return template.CSS(pageCSS) }

// pageHead opens every page the report writes; its template needs the
// "css" function and a Title.
const pageHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>{{css}}</style>
</head>
<body>
<h1>{{.Title}}</h1>
`

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"css": css,
	"ms":  func(v float64) string { return fmtMs(v) },
	"pct": func(v float64) string { return fmt.Sprintf("%.4f%%", 100*v) },
}).Parse(pageHead + `{{range .Saturated}}<div class="warn">Warning: step {{.Step}}: the load generator was saturated{{if .SaturationReason}} ({{.SaturationReason}}){{end}}. Its latencies say more about the generator than about the server.</div>
{{end}}
<h2>Summary</h2>
<table>
<tr><th>step</th><th>clients</th><th>rooms</th><th>sent</th><th>expected</th><th>received</th><th>lost</th><th>delivery ratio</th><th>orphans</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>mean</th><th>stddev</th><th>saturated</th></tr>
{{range .Steps}}<tr{{if .Saturated}} class="saturated"{{end}}><td>{{.Step}}</td><td>{{.Clients}}</td><td>{{.Rooms}}</td><td>{{.Sent}}</td><td>{{.Expected}}</td><td>{{.Received}}</td><td>{{.Lost}}</td><td>{{pct .DeliveryRatio}}</td><td>{{.Orphans}}</td><td>{{ms .P50}}</td><td>{{ms .P90}}</td><td>{{ms .P99}}</td><td>{{ms .P999}}</td><td>{{ms .Max}}</td><td>{{ms .Mean}}</td><td>{{ms .Stddev}}</td><td>{{if .Saturated}}YES{{else}}no{{end}}</td></tr>
{{end}}{{with .Overall}}<tr><td><b>all</b></td><td>{{.Clients}}</td><td>{{.Rooms}}</td><td>{{.Sent}}</td><td>{{.Expected}}</td><td>{{.Received}}</td><td>{{.Lost}}</td><td>{{pct .DeliveryRatio}}</td><td>{{.Orphans}}</td><td>{{ms .P50}}</td><td>{{ms .P90}}</td><td>{{ms .P99}}</td><td>{{ms .P999}}</td><td>{{ms .Max}}</td><td>{{ms .Mean}}</td><td>{{ms .Stddev}}</td><td>{{if .Saturated}}YES{{else}}no{{end}}</td></tr>{{end}}
</table>
<p class="note">Latency = receive time − the message's due time (open-loop schedule). {{.Summary.Histogram}}.
{{if .Summary.Malformed}} {{.Summary.Malformed}} malformed rows were skipped.{{end}}
{{range .Summary.Truncated}} {{.}} ended with a partial line (skipped).{{end}}
{{if .ServerMalformed}} {{.ServerMalformed}} malformed server metrics rows were skipped.{{end}}</p>

{{if .Run}}<h2>Run</h2>
<dl>{{range .Run}}<dt>{{.K}}</dt><dd>{{.V}}</dd>{{end}}</dl>{{end}}
{{if .Machine}}<h2>Machine</h2>
<dl>{{range .Machine}}<dt>{{.K}}</dt><dd>{{.V}}</dd>{{end}}</dl>{{end}}
{{if .Scenario.Rows}}<h2>Scenario</h2>
<table><tr>{{range .Scenario.Cols}}<th>{{.}}</th>{{end}}</tr>
{{range .Scenario.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}

<h2>Charts</h2>
{{range .Charts}}<figure id="{{.Name}}">
<img src="{{.Name}}.png" width="1600" height="900" alt="{{.Title}}">
<figcaption><b>{{.Title}}.</b> {{.Caption}} <a href="{{.Name}}.svg">SVG</a> · <a href="{{.Name}}.png">PNG</a></figcaption>
</figure>
{{end}}
{{if .Files}}<h2>Data</h2>
<ul>{{range .Files}}<li><a href="{{.}}">{{.}}</a></li>{{end}}</ul>{{end}}
<p class="note">Inputs: {{range .Summary.Inputs}}{{.}} {{end}}— generated {{.Generated}} by scalechat report.</p>
</body>
</html>
`))
