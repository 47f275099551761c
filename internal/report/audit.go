package report

import (
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
	draws := []func() error{
		func() error { return auditRecovery(opts.Out, a) },
		func() error { return auditAnomalies(opts.Out, a) },
	}
	if err := build(opts.Out, draws, auditTmpl, auditPage(a)); err != nil {
		return nil, err
	}
	return auditCharts, nil
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

// auditData is the audit page's own content.
type auditData struct {
	A      *results.Audit
	Faults []results.AuditFault // the ones worth a row: not a clean drop
	Drops  int                  // clean drops left out of the table
}

func auditPage(a *results.Audit) page {
	d := auditData{A: a}
	for _, f := range a.Faults {
		if f.Kind == "drop" && f.AuditCounts == (results.AuditCounts{}) && f.RecoveredOK {
			d.Drops++
			continue
		}
		d.Faults = append(d.Faults, f)
	}
	pg := page{Title: "scalechat audit: delivery guarantees", Charts: auditCharts, Files: []string{results.AuditJSON}, Data: &d}
	if a.Broken {
		pg.Warnings = []string{"A delivery guarantee was BROKEN."}
	}
	pg.Warnings = append(pg.Warnings, sloWarnings(a.SLO)...)
	return pg
}

// auditTmpl is the audit page's parts.
var auditTmpl = pageTemplate(sloParts + `{{define "top"}}{{template "slo" .A.SLO}}{{with .A}}<h2>Verdict</h2>
<table id="guarantees">
<tr><th>guarantee</th><th>verdict</th><th>figures</th></tr>
{{range .Guarantees}}<tr{{if not .Held}} class="saturated"{{end}}><td>{{.Name}}</td><td>{{if .Held}}held{{else}}BROKEN{{end}}</td><td>{{.What}}</td></tr>
{{end}}</table>
<h2>Run</h2>
<dl><dt>started</dt><dd>{{when .Started}}</dd><dt>ended</dt><dd>{{when .Ended}}</dd><dt>clients</dt><dd>{{count .Clients}} in {{count .Rooms}} rooms</dd>
{{if .Nodes}}<dt>cluster</dt><dd>{{.Nodes}} nodes and {{or .Engine "Redis"}}, started by the audit</dd>{{end}}
<dt>messages sent</dt><dd>{{count .Sent}}</dd><dt>deliveries owed</dt><dd>{{count .Expected}}</dd><dt>delivered</dt><dd>{{count .Delivered}}</dd>
<dt>flagged by a gap</dt><dd>{{count .Flagged}}</dd><dt>unconfirmed sends</dt><dd>{{count .UnconfirmedSends}}</dd>
{{if .FirstError}}<dt>first error</dt><dd>{{.FirstError}}</dd>{{end}}</dl>{{end}}
{{end}}
{{define "bottom"}}<h2>Faults</h2>
<p>Before any fault: {{count .A.BeforeFaults.Missing}} missing, {{count .A.BeforeFaults.Duplicates}} duplicates, {{count .A.BeforeFaults.Reordered}} reordered.{{if .Drops}} {{.Drops}} dropped connections that recovered and cost nothing are left out of the table.{{end}}</p>
<div class="wide"><table id="faults">
<tr><th>at</th><th>fault</th><th>on</th><th>back after</th><th>missing</th><th>duplicates</th><th>reordered</th></tr>
{{range .Faults}}<tr><td>{{ts .At}}</td><td>{{.Kind}}</td><td>{{.Target}}</td><td>{{if .RecoveredOK}}{{dur .Recovered}}{{else}}not back{{end}}</td><td>{{count .Missing}}</td><td>{{count .Duplicates}}</td><td>{{count .Reordered}}</td></tr>
{{end}}</table></div>
{{end}}`)
