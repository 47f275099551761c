package report

import (
	"fmt"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
)

// runSLO returns the SLO verdicts of a run: analyze's (summary.json) when it
// judged any, else the load test's (meta.json).
func runSLO(s *results.Summary) []results.SLOResult {
	if len(s.SLO) > 0 {
		return s.SLO
	}
	if s.Meta != nil {
		return s.Meta.SLO
	}
	return nil
}

// sloWarnings are the run page's warnings for objectives not met.
func sloWarnings(rs []results.SLOResult) []string {
	var out []string
	for _, r := range rs {
		switch r.Verdict {
		case "missed":
			out = append(out, fmt.Sprintf("SLO missed: step %s, %s: %s.", r.Step, slo.Bare(r), r.Reason))
		case "inconclusive":
			out = append(out, fmt.Sprintf("SLO inconclusive: step %s, %s: %s.", r.Step, slo.Bare(r), r.Reason))
		}
	}
	return out
}

// sloParts is the run page's SLO table, shown when the run was judged.
const sloParts = `{{define "slo"}}{{with .}}<h2>SLOs</h2>
<div class="wide"><table id="slo"><tr><th>step</th><th>SLO</th><th>measured</th><th>verdict</th><th>why</th></tr>
{{range .}}<tr{{if ne (print .Verdict) "met"}} class="saturated"{{end}}><td>{{.Step}}</td><td>{{bare .}}</td><td>{{.Value}}</td><td>{{.Verdict}}</td><td>{{.Reason}}</td></tr>
{{end}}</table></div>
<p class="note">Each objective judged on each step it names (all steps when it names none); a step whose load
generator saturated is inconclusive whatever its figures say.</p>{{end}}{{end}}`
