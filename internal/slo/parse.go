package slo

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Kind is what a metric measures, which decides the units its limit takes.
type Kind int

// Kinds of metrics.
const (
	Duration Kind = iota // a time; limits need a unit (ns, us, µs, ms, s), kept in milliseconds
	Ratio                // a share; limits as 99.9% or 0.999, kept as a fraction
	Count                // a number of events; limits are whole numbers
	Bytes                // a size; limits need a unit (B, KiB, MiB, GiB), kept in bytes
)

// Metrics are the figures an objective may name, and their kinds.
var Metrics = map[string]Kind{
	"p50":              Duration, // delivery latency percentiles, from the message's due instant
	"p90":              Duration,
	"p99":              Duration,
	"p99.9":            Duration,
	"max":              Duration,
	"connect_p99":      Duration, // a client's connect, from its due instant to its last joined frame
	"cpu_per_delivery": Duration, // server CPU time per delivery (needs --server-metrics)
	"rss_per_conn":     Bytes,    // scalechat bench: the server's memory growth per connection held
	// scalechat bench: a cluster's Redis CPU time per delivery, and
	// nats-server's of a cluster on NATS.
	"redis_per_delivery": Duration,
	"nats_per_delivery":  Duration,
	"delivery":           Ratio,    // received ÷ expected deliveries
	"loss":               Ratio,    // lost ÷ expected deliveries
	"lost":               Count,    // expected deliveries that did not arrive
	"connect_errors":     Count,    // clients that failed to connect or join
	"disconnects":        Count,    // connections dropped during the step
	"errors":             Count,    // connect errors, disconnects and failed HTTP requests
	"refusals":           Count,    // the server's error frames, rate_limited among them
	"rate_limited":       Count,    // refusals for the server's rate limit (code rate_limited, HTTP 429)
	"unavailable":        Count,    // messages the server gave up (code unavailable: its cluster could not take them)
	"unexpected":         Count,    // deliveries from senders or rooms the run did not create
	"recovery":           Duration, // audit: the longest time from a fault until every client was back in its room
	"duplicates":         Count,    // audit: deliveries received twice
	"reordered":          Count,    // audit: deliveries below the previous seq on their connection
}

// Op compares a measured value with an objective's limit.
type Op string

// Comparison operators, longest first for the parser.
const (
	LessEq    Op = "<="
	GreaterEq Op = ">="
	Equal     Op = "=="
	Less      Op = "<"
	Greater   Op = ">"
)

var ops = []Op{LessEq, GreaterEq, Equal, Less, Greater}

// Holds reports whether value v meets the comparison with limit.
func (o Op) Holds(v, limit float64) bool {
	switch o {
	case LessEq:
		return v <= limit
	case GreaterEq:
		return v >= limit
	case Equal:
		return v == limit
	case Less:
		return v < limit
	case Greater:
		return v > limit
	}
	return false
}

// Objective is one parsed objective.
type Objective struct {
	Step   string  // "" for every step
	Metric string  // a key of Metrics
	Op     Op      // how the measured value compares with Limit
	Limit  float64 // milliseconds, a fraction, a count or bytes, by the metric's Kind
	Text   string  // the objective as written, without spaces
}

// String returns the objective as written.
func (o Objective) String() string { return o.Text }

// Kind returns the kind of the objective's metric.
func (o Objective) Kind() Kind { return Metrics[o.Metric] }

// Parse reads objectives: each argument holds one or more, separated by
// commas (a repeated --slo flag gives several arguments). It returns the
// first bad one's error, one sentence naming it.
func Parse(args ...string) ([]Objective, error) {
	var out []Objective
	for _, a := range args {
		for _, e := range strings.Split(a, ",") {
			o, err := parseOne(e)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
	}
	return out, nil
}

func parseOne(expr string) (Objective, error) {
	text := strings.Join(strings.Fields(expr), "")
	if text == "" {
		return Objective{}, errors.New("empty SLO (want e.g. p99<50ms; separate several with commas)")
	}
	o := Objective{Text: text}
	rest := text
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		o.Step, rest = rest[:i], rest[i+1:]
		if o.Step == "" {
			return o, fmt.Errorf("SLO %q: empty step name before ':' (want e.g. s2:p99<50ms)", text)
		}
	}
	at := -1
	for i := range rest {
		for _, op := range ops {
			if strings.HasPrefix(rest[i:], string(op)) {
				at, o.Op = i, op
				break
			}
		}
		if at >= 0 {
			break
		}
	}
	if at < 0 {
		return o, fmt.Errorf("SLO %q has no comparison (want one of < <= > >= ==, e.g. p99<50ms)", text)
	}
	o.Metric = strings.ToLower(rest[:at])
	value := rest[at+len(o.Op):]
	kind, ok := Metrics[o.Metric]
	if !ok {
		return o, fmt.Errorf("SLO %q: unknown metric %q (known: %s)", text, o.Metric, strings.Join(metricNames(), ", "))
	}
	if strings.ContainsAny(value, "<>=") {
		return o, fmt.Errorf("SLO %q has more than one comparison", text)
	}
	var err error
	if o.Limit, err = parseLimit(kind, value); err != nil {
		return o, fmt.Errorf("SLO %q: %w", text, err)
	}
	return o, nil
}

func metricNames() []string {
	names := make([]string, 0, len(Metrics))
	for n := range Metrics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// durationUnits are the units of a Duration limit, in milliseconds.
var durationUnits = map[string]float64{"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1, "s": 1000}

func parseLimit(kind Kind, v string) (float64, error) {
	if v == "" {
		return 0, errors.New("no value after the comparison")
	}
	switch kind {
	case Duration:
		return withUnit(v, durationUnits, "time", "ns, us, ms or s", "ms", "50ms, 200us, 1.5s")
	case Bytes:
		return withUnit(v, byteUnits, "size", "B, KiB, MiB or GiB", "KiB", "2KiB, 512B")
	case Ratio:
		if num, ok := strings.CutSuffix(v, "%"); ok {
			f, err := number(num)
			if err == nil && f > 100 {
				return 0, fmt.Errorf("%s is more than 100%%", v)
			}
			return f / 100, err
		}
		f, err := number(v)
		if err == nil && f > 1 {
			return 0, fmt.Errorf("the share %s is more than 1 (write %s%% for a percentage)", v, v)
		}
		return f, err
	default:
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number of events", v)
		}
		return float64(n), nil
	}
}

// byteUnits are the units of a Bytes limit, in bytes.
var byteUnits = map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

// withUnit parses a number followed by one of units (each worth its value
// in the kind's base unit) into the base unit; a bare number is refused,
// with the hint of unit after it.
func withUnit(v string, units map[string]float64, what, names, unit, examples string) (float64, error) {
	cut := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if cut < 0 {
		return 0, fmt.Errorf("the %s %s needs a unit (%s), e.g. %s%s", what, v, names, v, unit)
	}
	per, ok := units[v[cut:]]
	if !ok || cut == 0 {
		return 0, fmt.Errorf("%q is not a %s (want e.g. %s)", v, what, examples)
	}
	f, err := number(v[:cut])
	return f * per, err
}

// number parses a non-negative decimal number.
func number(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || strings.ContainsAny(s, "eEnNiIxX+") {
		return 0, fmt.Errorf("%q is not a non-negative decimal number", s)
	}
	return f, nil
}
