package report

import (
	_ "embed"
	"html/template"

	"github.com/scalechat/scalechat/internal/results"
)

// exploreJS draws the run page's interactive time series: an inline SVG,
// hover for the values at an instant, drag to zoom, double-click to reset.
// Hand-written, no library: the page stays one file that opens offline.
//
//go:embed explore.js
var exploreJS string

// exploreSeries is one step's line: seconds since the run's first
// interval, deliveries per second, p99 in ms (null without deliveries).
type exploreSeries struct {
	Step      string   `json:"step"`
	Saturated bool     `json:"saturated"`
	Points    [][3]any `json:"points"`
}

// exploreData lays the time series out for explore.js, steps in run order.
func exploreData(steps []results.StepStats, series []results.SeriesPoint) []exploreSeries {
	if len(series) == 0 {
		return nil
	}
	t0 := series[0].UnixUS
	for _, p := range series {
		t0 = min(t0, p.UnixUS)
	}
	out := make([]exploreSeries, 0, len(steps))
	for _, s := range steps {
		e := exploreSeries{Step: s.Step, Saturated: s.Saturated, Points: [][3]any{}}
		for _, p := range series {
			if p.Step != s.Step {
				continue
			}
			var p99 any // JSON null: no latency in an interval without deliveries
			if p.Deliveries > 0 {
				p99 = p.P99Ms
			}
			e.Points = append(e.Points, [3]any{float64(p.UnixUS-t0) / 1e6, p.PerSecond, p99})
		}
		if len(e.Points) > 0 {
			out = append(out, e)
		}
	}
	return out
}

// exploreScript is explore.js for the page's script element.
func exploreScript() template.JS { return template.JS(exploreJS) }
