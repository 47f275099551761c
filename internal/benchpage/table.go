package benchpage

import (
	"fmt"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
)

// column is one column of a results table: its heading and how a row
// shows in it ("" when the row has no such figure).
type column struct {
	head  string
	right bool // numbers, aligned right
	value func(results.BenchRow) string
}

// columns are every column a table may have, in order; a table keeps
// those some row of it fills.
func columns() []column {
	return []column{
		{"scenario", false, func(r results.BenchRow) string { return r.Scenario }},
		{"clients", true, func(r results.BenchRow) string { return positive(float64(r.Clients), "%.0f") }},
		{"deliveries/s", true, func(r results.BenchRow) string { return rate(r.PerSecond) }},
		{"delivered", true, func(r results.BenchRow) string { return share(r.Ratio) }},
		{"p50", true, func(r results.BenchRow) string { return ms(r.P50) }},
		{"p99", true, func(r results.BenchRow) string { return ms(r.P99) }},
		{"max", true, func(r results.BenchRow) string { return ms(r.Max) }},
		{"server CPU", true, func(r results.BenchRow) string { return positive(r.ServerCPU, "%.2f s") }},
		{"µs/delivery", true, func(r results.BenchRow) string { return positive(r.CPUPerDel, "%.2f") }},
		{"server RSS", true, func(r results.BenchRow) string { return positive(float64(r.RSS)/(1<<20), "%.1f MiB") }},
		{"node CPU vs 1 node", true, func(r results.BenchRow) string { return positive(r.NodeRatio, "×%.2f") }},
		{"Redis µs/delivery", true, func(r results.BenchRow) string { return positive(r.RedisPerDel, "%.2f") }},
		{"NATS µs/delivery", true, func(r results.BenchRow) string { return positive(r.NATSPerDel, "%.2f") }},
		{"generator CPU", true, func(r results.BenchRow) string { return positive(r.GenCPU, "%.2f s") }},
		{"generator saturated", false, func(r results.BenchRow) string {
			if r.Saturated {
				return "YES"
			}
			return ""
		}},
		{"figure", false, func(r results.BenchRow) string { return r.Figure }},
		{"target", false, func(r results.BenchRow) string { return r.Target }},
		{"result", false, func(r results.BenchRow) string { return r.Verdict }},
	}
}

// table is the rows as a Markdown table of the columns some row fills.
func table(rows []results.BenchRow) string {
	var used []column
	for _, c := range columns() {
		for _, r := range rows {
			if c.value(r) != "" {
				used = append(used, c)
				break
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) { fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | ")) }
	var head, rule []string
	for _, c := range used {
		head = append(head, c.head)
		if c.right {
			rule = append(rule, "---:")
		} else {
			rule = append(rule, "---")
		}
	}
	line(head)
	line(rule)
	for _, r := range rows {
		var cells []string
		for _, c := range used {
			cells = append(cells, cell(c.value(r)))
		}
		line(cells)
	}
	return b.String()
}

// positive formats v, or gives "" when it was not measured (0 or less).
func positive(v float64, format string) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf(format, v)
}

func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1f k", v/1e3)
	}
	return positive(v, "%.0f")
}

func share(v float64) string {
	if v == 1 {
		return "100 %"
	}
	if v < 0 {
		return ""
	}
	return fmt.Sprintf("%.3f %%", 100*v)
}

func ms(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return positive(v, "%.2f ms")
}
