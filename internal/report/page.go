package report

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"time"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
)

// page is what every page of the report has: one skeleton, one style, one
// writer. Each kind of page (a run, an audit, a transports or a targets
// comparison) fills in Data and defines its "top" part (above the charts)
// and its "bottom" part (below them) in pageTemplate.
type page struct {
	Title string
	// Warnings open the page in red: what makes its figures suspect.
	Warnings []string
	Charts   []Chart
	// Files are the data files beside index.html that the page links to;
	// writePage keeps those present.
	Files []string
	// Note ends the page, before the time it was generated.
	Note      string
	Generated string
	Data      any
}

// pageCSS styles every page the report writes. Wide tables scroll inside
// their .wide box instead of widening the page.
const pageCSS = `
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1700px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.8rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.95rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: right; vertical-align: top; white-space: nowrap; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.wide { overflow-x: auto; max-width: 100%; }
table.nested { font-size: 0.85rem; margin: 0; }
table.nested th, table.nested td { border-color: #e2e2e2; padding: 0.1rem 0.4rem; }
table.nested th { background: #fafafa; font-weight: normal; text-align: left; }
tr.saturated td { background: #fde2e2; }
.warn { background: #fde2e2; border: 2px solid #d62728; padding: 0.8rem 1rem; margin: 1rem 0; font-weight: bold; }
figure { margin: 2rem 0; } figure img { width: 100%; max-width: 1600px; height: auto; border: 1px solid #ddd; }
figcaption { margin-top: 0.4rem; } dl { display: grid; grid-template-columns: max-content auto; gap: 0.2rem 1rem; }
dt { font-weight: bold; } dd { margin: 0; } .note { color: #555; font-size: 0.9rem; }
#explore { position: relative; max-width: 1600px; } svg.explore { width: 100%; height: auto; border: 1px solid #ddd; user-select: none; }
#explore .tip { position: absolute; display: none; white-space: pre; background: #fff; border: 1px solid #999; padding: 0.3rem 0.5rem; font-size: 0.85rem; pointer-events: none; }
#explore-metric button { font: inherit; margin: 0 0.3rem 0.5rem 0; }
`

// pageLayout is the skeleton of every page.
const pageLayout = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>{{css}}</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{range .Warnings}}<div class="warn">{{.}}</div>
{{end}}{{template "top" .Data}}
{{if .Charts}}<h2>Charts</h2>
{{range .Charts}}<figure id="{{.Name}}">
<img src="{{.Name}}.png" width="1600" height="900" alt="{{.Title}}">
<figcaption><b>{{.Title}}.</b> {{.Caption}} <a href="{{.Name}}.svg">SVG</a> · <a href="{{.Name}}.png">PNG</a></figcaption>
</figure>
{{end}}{{end}}{{template "bottom" .Data}}
{{if .Files}}<h2>Data</h2>
<ul>{{range .Files}}<li><a href="{{.}}">{{.}}</a></li>{{end}}</ul>{{end}}
<p class="note">{{with .Note}}{{.}} {{end}}Generated {{.Generated}} by scalechat report.</p>
</body>
</html>
{{define "top"}}{{end}}{{define "bottom"}}{{end}}`

// pageFuncs are the formatting functions every page's parts may use.
var pageFuncs = template.FuncMap{
	"css": func() template.CSS { return template.CSS(pageCSS) },
	"ms":  fmtMs,
	// lat shows "–" for the latencies of a step with no delivery: they
	// were not measured, they are not 0.
	"lat": func(s results.StepStats, v float64) string {
		if !s.Measured() {
			return "–"
		}
		return fmtMs(v)
	},
	"pct": fmtPct,
	// bare is an SLO without the step it names: the table has a step column.
	"bare":    slo.Bare,
	"count":   count,
	"bytes":   size,
	"num":     fmtNumber,
	"when":    when,
	"value":   valueHTML,
	"dur":     func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"ts":      func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"explore": exploreScript,
}

// skeleton is never executed itself (a template executed cannot be
// cloned): pageTemplate clones it for each kind of page.
var skeleton = template.Must(template.New("page").Funcs(pageFuncs).Parse(pageLayout))

// pageTemplate returns the skeleton with a kind's "top" and "bottom"
// parts, defined in parts.
func pageTemplate(parts string) *template.Template {
	return template.Must(template.Must(skeleton.Clone()).Parse(parts))
}

// writePage writes dir/index.html: pg through t.
func writePage(dir string, t *template.Template, pg page) error {
	pg.Generated = time.Now().UTC().Format(time.RFC3339)
	var files []string
	for _, f := range pg.Files {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			files = append(files, f)
		}
	}
	pg.Files = files
	path := filepath.Join(dir, "index.html")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.Execute(f, pg); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// build draws a page's charts into dir, then writes its index.html.
func build(dir string, draws []func() error, t *template.Template, pg page) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range draws {
		if err := d(); err != nil {
			return fmt.Errorf("draw: %w", err)
		}
	}
	return writePage(dir, t, pg)
}
