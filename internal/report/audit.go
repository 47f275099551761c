package report

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/scalechat/scalechat/internal/results"
)

// LoadAudit reads an audit (scalechat audit --out) from its folder or its
// audit.json; it reports false when path is neither.
func LoadAudit(path string) (*results.Audit, bool, error) {
	p := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		p = filepath.Join(path, results.AuditJSON)
		if _, err := os.Stat(p); err != nil {
			return nil, false, nil
		}
	} else if filepath.Base(path) != results.AuditJSON {
		return nil, false, nil
	}
	a, err := results.ReadAudit(p)
	return a, true, err
}

// auditCharts are the charts of an audit.
var auditCharts = []Chart{
	{"audit_recovery", "Recovery after each fault",
		"How long after each fault the client (a dropped connection) or every client (a node or Redis fault) was back in its room, against the time of the fault."},
	{"audit_anomalies", "What went wrong, by fault",
		"Deliveries missing without a gap, duplicated and reordered, counted against the last fault before them, summed per kind of fault."},
}

// WriteAudit draws the audit's charts into opts.Out and writes index.html.
func WriteAudit(a *results.Audit, opts Options) ([]Chart, error) {
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	if err := auditRecovery(opts.Out, a); err != nil {
		return nil, fmt.Errorf("draw: %w", err)
	}
	if err := auditAnomalies(opts.Out, a); err != nil {
		return nil, fmt.Errorf("draw: %w", err)
	}
	f, err := os.Create(filepath.Join(opts.Out, "index.html"))
	if err != nil {
		return nil, err
	}
	if err := writeAuditHTML(f, a, opts.Out); err != nil {
		f.Close()
		return nil, err
	}
	return auditCharts, f.Close()
}

// faultKinds lists the kinds of fault in the order met.
func faultKinds(a *results.Audit) []string {
	var kinds []string
	seen := map[string]bool{}
	for _, f := range a.Faults {
		if !seen[f.Kind] {
			seen[f.Kind] = true
			kinds = append(kinds, f.Kind)
		}
	}
	return kinds
}

func auditRecovery(dir string, a *results.Audit) error {
	p := newPlot(auditCharts[0].Title, "seconds since the audit started", "back in the room after (ms)", false)
	p.Y.Min = 0
	for k, kind := range faultKinds(a) {
		var xys plotter.XYs
		for _, f := range a.Faults {
			if f.Kind == kind && f.RecoveredOK {
				xys = append(xys, plotter.XY{X: f.At.Sub(a.Started).Seconds(), Y: float64(f.Recovered) / float64(time.Millisecond)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.Color, s.Shape, s.Radius = plotutil.Color(k), plotutil.Shape(k), vg.Points(5)
		p.Add(s)
		p.Legend.Add(kind, s)
	}
	return savePlot(dir, auditCharts[0].Name, p)
}

func auditAnomalies(dir string, a *results.Audit) error {
	groups := append([]string{"before any fault"}, faultKinds(a)...)
	sum := make([]results.AuditCounts, len(groups))
	sum[0] = a.BeforeFaults
	for _, f := range a.Faults {
		for i, g := range groups {
			if g == f.Kind {
				sum[i].Missing += f.Missing
				sum[i].Duplicates += f.Duplicates
				sum[i].Reordered += f.Reordered
			}
		}
	}
	p := newPlot(auditCharts[1].Title, "", "deliveries", false)
	series := make([]plotter.Values, 3)
	for k := range series {
		series[k] = make(plotter.Values, len(groups))
	}
	for i, c := range sum {
		series[0][i], series[1][i], series[2][i] = float64(c.Missing), float64(c.Duplicates), float64(c.Reordered)
	}
	if err := groupedBars(p, groups, series, []string{"missing", "duplicates", "reordered"}, barWidth(3)); err != nil {
		return err
	}
	p.Y.Max = max(p.Y.Max, 1)
	p.Y.Tick.Marker = countTicks{}
	return savePlot(dir, auditCharts[1].Name, p)
}

type auditPage struct {
	Title     string
	Generated string
	A         *results.Audit
	Charts    []Chart
	Faults    []results.AuditFault // the ones worth a row: not a clean drop
	Drops     int                  // clean drops left out of the table
	HasJSON   bool
}

func writeAuditHTML(w io.Writer, a *results.Audit, dir string) error {
	pg := auditPage{Title: "scalechat audit: delivery guarantees", Generated: time.Now().UTC().Format(time.RFC3339), A: a, Charts: auditCharts}
	for _, f := range a.Faults {
		if f.Kind == "drop" && f.AuditCounts == (results.AuditCounts{}) && f.RecoveredOK {
			pg.Drops++
			continue
		}
		pg.Faults = append(pg.Faults, f)
	}
	_, err := os.Stat(filepath.Join(dir, results.AuditJSON))
	pg.HasJSON = err == nil
	return auditTmpl.Execute(w, pg)
}

var auditTmpl = template.Must(template.New("audit").Funcs(template.FuncMap{
	"css": css,
	"dur": func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"ts":  func(t time.Time) string { return t.Format("15:04:05.000") },
}).Parse(pageHead + `{{with .A}}{{if .Broken}}<div class="warn">A delivery guarantee was BROKEN.</div>{{end}}
<h2>Verdict</h2>
<table id="guarantees">
<tr><th>guarantee</th><th>verdict</th><th>figures</th></tr>
{{range .Guarantees}}<tr{{if not .Held}} class="saturated"{{end}}><td>{{.Name}}</td><td>{{if .Held}}held{{else}}BROKEN{{end}}</td><td>{{.What}}</td></tr>
{{end}}</table>
<h2>Run</h2>
<dl><dt>started</dt><dd>{{.Started}}</dd><dt>ended</dt><dd>{{.Ended}}</dd><dt>clients</dt><dd>{{.Clients}} in {{.Rooms}} rooms</dd>
{{if .Nodes}}<dt>cluster</dt><dd>{{.Nodes}} nodes and Redis, started by the audit</dd>{{end}}
<dt>messages sent</dt><dd>{{.Sent}}</dd><dt>deliveries owed</dt><dd>{{.Expected}}</dd><dt>delivered</dt><dd>{{.Delivered}}</dd>
<dt>flagged by a gap</dt><dd>{{.Flagged}}</dd><dt>unconfirmed sends</dt><dd>{{.UnconfirmedSends}}</dd>
{{if .FirstError}}<dt>first error</dt><dd>{{.FirstError}}</dd>{{end}}</dl>{{end}}

<h2>Charts</h2>
{{range .Charts}}<figure id="{{.Name}}">
<img src="{{.Name}}.png" width="1600" height="900" alt="{{.Title}}">
<figcaption><b>{{.Title}}.</b> {{.Caption}} <a href="{{.Name}}.svg">SVG</a> · <a href="{{.Name}}.png">PNG</a></figcaption>
</figure>
{{end}}
<h2>Faults</h2>
<p>Before any fault: {{.A.BeforeFaults.Missing}} missing, {{.A.BeforeFaults.Duplicates}} duplicates, {{.A.BeforeFaults.Reordered}} reordered.{{if .Drops}} {{.Drops}} dropped connections that recovered and cost nothing are left out of the table.{{end}}</p>
<table id="faults">
<tr><th>at</th><th>fault</th><th>on</th><th>back after</th><th>missing</th><th>duplicates</th><th>reordered</th></tr>
{{range .Faults}}<tr><td>{{ts .At}}</td><td>{{.Kind}}</td><td>{{.Target}}</td><td>{{if .RecoveredOK}}{{dur .Recovered}}{{else}}not back{{end}}</td><td>{{.Missing}}</td><td>{{.Duplicates}}</td><td>{{.Reordered}}</td></tr>
{{end}}</table>
{{if .HasJSON}}<h2>Data</h2><ul><li><a href="audit.json">audit.json</a></li></ul>{{end}}
<p class="note">Generated {{.Generated}} by scalechat report.</p>
</body>
</html>
`))
