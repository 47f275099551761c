package diff

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Metric is one figure a diff compares.
type Metric struct {
	Name string
	// Quantile is the latency quantile of p50 … p99.9; 0 for the others.
	Quantile float64
	// Unit is the unit of the figures; ChangeUnit that of the change: %
	// (relative) or pp (percentage points).
	Unit, ChangeUnit string
	// Worse is +1 when a rise is worse (latency, CPU), -1 when a fall is
	// (delivery).
	Worse float64
	// Margin is the default threshold: a change whose whole interval lies
	// within ±Margin is the same.
	Margin float64
}

// Metrics are the figures of a diff, in the order they are printed.
var Metrics = []Metric{
	{Name: "p50", Quantile: .5, Unit: "ms", ChangeUnit: "%", Worse: 1, Margin: 10},
	{Name: "p90", Quantile: .9, Unit: "ms", ChangeUnit: "%", Worse: 1, Margin: 10},
	{Name: "p99", Quantile: .99, Unit: "ms", ChangeUnit: "%", Worse: 1, Margin: 10},
	{Name: "p99.9", Quantile: .999, Unit: "ms", ChangeUnit: "%", Worse: 1, Margin: 10},
	{Name: "delivery", Unit: "ratio", ChangeUnit: "pp", Worse: -1, Margin: 0},
	{Name: "cpu", Unit: "µs", ChangeUnit: "%", Worse: 1, Margin: 10},
}

func metricNames() string {
	names := make([]string, len(Metrics))
	for i, m := range Metrics {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// Gate holds the thresholds of --fail-on, by metric name: the margin beyond
// which a change is a regression, as a magnitude in the metric's
// ChangeUnit.
type Gate map[string]float64

// ParseGate reads --fail-on: comma-separated metric:threshold entries such
// as "p99:+10%,delivery:-0.1pp". Latencies and cpu take a % that may only
// be positive (they get worse upwards), delivery takes pp that may only be
// negative; the sign may be left out. Every bad entry gets one sentence.
func ParseGate(s string) (Gate, error) {
	g := Gate{}
	if strings.TrimSpace(s) == "" {
		return g, nil
	}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		name, value, ok := strings.Cut(entry, ":")
		if entry == "" {
			return nil, fmt.Errorf("--fail-on has an empty entry (write metric:threshold, e.g. p99:+10%%)")
		}
		if !ok {
			return nil, fmt.Errorf("--fail-on entry %q has no colon (write metric:threshold, e.g. p99:+10%%)", entry)
		}
		m, ok := metricByName(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("--fail-on entry %q names an unknown metric (known: %s)", entry, metricNames())
		}
		if _, dup := g[m.Name]; dup {
			return nil, fmt.Errorf("--fail-on names %s twice", m.Name)
		}
		v, err := parseThreshold(m, strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("--fail-on entry %q: %w", entry, err)
		}
		g[m.Name] = v
	}
	return g, nil
}

// parseThreshold reads "+10%" or "-0.1pp" for m and returns its magnitude.
func parseThreshold(m Metric, v string) (float64, error) {
	example := m.Name + ":+10%"
	if m.Worse < 0 {
		example = m.Name + ":-0.1pp"
	}
	num, ok := strings.CutSuffix(v, m.ChangeUnit)
	if !ok {
		return 0, fmt.Errorf("%s takes a threshold in %s, e.g. %s", m.Name, m.ChangeUnit, example)
	}
	sign := 0.0
	switch {
	case strings.HasPrefix(num, "+"):
		sign, num = 1, num[1:]
	case strings.HasPrefix(num, "-"):
		sign, num = -1, num[1:]
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || strings.ContainsAny(num, "+-") {
		return 0, fmt.Errorf("%q is not a number, e.g. %s", num, example)
	}
	if sign != 0 && sign != m.Worse && f != 0 {
		way := "upwards"
		if m.Worse < 0 {
			way = "downwards"
		}
		return 0, fmt.Errorf("%s gets worse %s, so its threshold is signed that way, e.g. %s", m.Name, way, example)
	}
	return f, nil
}

func metricByName(name string) (Metric, bool) {
	for _, m := range Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// String writes g back in --fail-on's grammar, in the order of Metrics.
func (g Gate) String() string {
	var parts []string
	for _, m := range Metrics {
		if v, ok := g[m.Name]; ok {
			sign := "+"
			if m.Worse < 0 {
				sign = "-"
			}
			parts = append(parts, m.Name+":"+sign+strconv.FormatFloat(v, 'f', -1, 64)+m.ChangeUnit)
		}
	}
	return strings.Join(parts, ",")
}
