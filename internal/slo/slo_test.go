package slo

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

func TestParseGood(t *testing.T) {
	tests := []struct {
		expr  string
		step  string
		name  string
		op    Op
		limit float64
	}{
		{"p99<50ms", "", "p99", Less, 50},
		{"p99.9<200ms", "", "p99.9", Less, 200},
		{" p50 <= 1.5s ", "", "p50", LessEq, 1500},
		{"max<800us", "", "max", Less, 0.8},
		{"max<800µs", "", "max", Less, 0.8},
		{"p90<2000000ns", "", "p90", Less, 2},
		{"p99<0.001ms", "", "p99", Less, 0.001},
		{"delivery>=99.9%", "", "delivery", GreaterEq, 0.999},
		{"delivery>=0.999", "", "delivery", GreaterEq, 0.999},
		{"loss<=0.1%", "", "loss", LessEq, 0.001},
		{"connect_errors==0", "", "connect_errors", Equal, 0},
		{"refusals==0", "", "refusals", Equal, 0},
		{"cpu_per_delivery<20us", "", "cpu_per_delivery", Less, 0.02},
		{"rss_per_conn<=2KiB", "", "rss_per_conn", LessEq, 2048},
		{"split:redis_per_delivery<=3us", "split", "redis_per_delivery", LessEq, 0.003},
		{"rss_per_conn<1.5MiB", "", "rss_per_conn", Less, 1.5 * (1 << 20)},
		{"s2:p99<50ms", "s2", "p99", Less, 50},
		{"big-step:errors>3", "big-step", "errors", Greater, 3},
		{"P99<5ms", "", "p99", Less, 5},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			objs, err := Parse(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 1 {
				t.Fatalf("got %d objectives", len(objs))
			}
			o := objs[0]
			if o.Step != tt.step || o.Metric != tt.name || o.Op != tt.op || !near(o.Limit, tt.limit) {
				t.Errorf("got %+v", o)
			}
			if strings.ContainsAny(o.Text, " ") {
				t.Errorf("text %q keeps spaces", o.Text)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

func TestParseSeveral(t *testing.T) {
	objs, err := Parse("p99<50ms,delivery>=99.9%", "s1:connect_errors==0")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.String())
	}
	if strings.Join(got, " ") != "p99<50ms delivery>=99.9% s1:connect_errors==0" {
		t.Errorf("got %v", got)
	}
}

func TestParseBad(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", `empty SLO (want e.g. p99<50ms; separate several with commas)`},
		{"p99<50ms,", `empty SLO (want e.g. p99<50ms; separate several with commas)`},
		{"p99", `SLO "p99" has no comparison (want one of < <= > >= ==, e.g. p99<50ms)`},
		{"p99=50ms", `SLO "p99=50ms" has no comparison (want one of < <= > >= ==, e.g. p99<50ms)`},
		{"p98<50ms", `SLO "p98<50ms": unknown metric "p98" (known: `},
		{"p99<50", `SLO "p99<50": the time 50 needs a unit (ns, us, ms or s), e.g. 50ms`},
		{"p99<50min", `SLO "p99<50min": "50min" is not a time (want e.g. 50ms, 200us, 1.5s)`},
		{"rss_per_conn<2", `SLO "rss_per_conn<2": the size 2 needs a unit (B, KiB, MiB or GiB), e.g. 2KiB`},
		{"rss_per_conn<2kb", `SLO "rss_per_conn<2kb": "2kb" is not a size (want e.g. 2KiB, 512B)`},
		{"p99<ms", `SLO "p99<ms": "ms" is not a time (want e.g. 50ms, 200us, 1.5s)`},
		{"p99<-5ms", `SLO "p99<-5ms": "-5ms" is not a time (want e.g. 50ms, 200us, 1.5s)`},
		{"p99<1.2.3ms", `SLO "p99<1.2.3ms": "1.2.3" is not a non-negative decimal number`},
		{"p99<", `SLO "p99<": no value after the comparison`},
		{"p99<<5ms", `SLO "p99<<5ms" has more than one comparison`},
		{"delivery>=101%", `SLO "delivery>=101%": 101% is more than 100%`},
		{"delivery>=99.9", `SLO "delivery>=99.9": the share 99.9 is more than 1 (write 99.9% for a percentage)`},
		{"delivery>=lots", `SLO "delivery>=lots": "lots" is not a non-negative decimal number`},
		{"connect_errors<1.5", `SLO "connect_errors<1.5": "1.5" is not a whole number of events`},
		{"connect_errors<5ms", `SLO "connect_errors<5ms": "5ms" is not a whole number of events`},
		{":p99<5ms", `SLO ":p99<5ms": empty step name before ':' (want e.g. s2:p99<50ms)`},
		{"delivery>=1e2%", `SLO "delivery>=1e2%": "1e2" is not a non-negative decimal number`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := Parse(tt.expr)
			if err == nil {
				t.Fatalf("no error")
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %q, want %q", err, tt.want)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	steps := []Step{
		{Name: "s1", Figures: map[string]float64{"p99": 3.1, "delivery": 1, "connect_errors": 0}},
		{Name: "s2", Figures: map[string]float64{"p99": 63.2, "delivery": 0.9995, "connect_errors": 2}},
		{Name: "s3", Figures: map[string]float64{"p99": 1, "delivery": 1}, Saturated: "generator CPU 95% of 2 cores"},
	}
	tests := []struct {
		expr  string
		want  []Verdict
		value []string
	}{
		{"p99<50ms", []Verdict{Met, Missed, Inconclusive}, []string{"3.1ms", "63.2ms", "1ms"}},
		{"s2:p99<100ms", []Verdict{Met}, []string{"63.2ms"}},
		{"delivery>=99.99%", []Verdict{Met, Missed, Inconclusive}, []string{"100%", "99.95%", "100%"}},
		{"connect_errors==0", []Verdict{Met, Missed, Inconclusive}, []string{"0", "2", "–"}},
		{"cpu_per_delivery<20us", []Verdict{Inconclusive, Inconclusive, Inconclusive}, []string{"–", "–", "–"}},
		{"s9:p99<1ms", []Verdict{Inconclusive}, []string{"–"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			objs, err := Parse(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			rs := Evaluate(objs, steps)
			if len(rs) != len(tt.want) {
				t.Fatalf("got %d results, want %d: %+v", len(rs), len(tt.want), rs)
			}
			for i, r := range rs {
				if r.Verdict != tt.want[i] || r.Value != tt.value[i] || r.Reason == "" {
					t.Errorf("result %d: %+v, want %s with %s", i, r, tt.want[i], tt.value[i])
				}
			}
		})
	}
}

func TestReasons(t *testing.T) {
	objs, _ := Parse("p99<50ms")
	rs := Evaluate(objs, []Step{{Name: "s2", Figures: map[string]float64{"p99": 63.2}}})
	if rs[0].Reason != "p99 = 63.2ms, not < 50ms" {
		t.Errorf("reason %q", rs[0].Reason)
	}
	rs = Evaluate(objs, []Step{{Name: "s3", Figures: map[string]float64{"p99": 1}, Saturated: "generator CPU 95% of 2 cores"}})
	if !strings.Contains(rs[0].Reason, "saturated (generator CPU 95% of 2 cores)") {
		t.Errorf("reason %q", rs[0].Reason)
	}
}

func TestWorst(t *testing.T) {
	tests := []struct {
		in   []Verdict
		want Verdict
	}{
		{nil, Met},
		{[]Verdict{Met, Met}, Met},
		{[]Verdict{Met, Inconclusive}, Inconclusive},
		{[]Verdict{Inconclusive, Missed, Met}, Missed},
	}
	for _, tt := range tests {
		var rs []Result
		for _, v := range tt.in {
			rs = append(rs, Result{Verdict: v})
		}
		if got := Worst(rs); got != tt.want {
			t.Errorf("Worst(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		kind Kind
		v    float64
		want string
	}{
		{Duration, 0.02, "20us"}, {Duration, 1234, "1.234s"}, {Duration, 0.0000005, "0.5ns"}, {Duration, 0, "0ms"},
		{Ratio, 0.99951, "99.951%"}, {Count, 7, "7"}, {Bytes, 1536, "1.5KiB"}, {Bytes, 3 << 20, "3MiB"},
	}
	for _, tt := range tests {
		if got := Format(tt.kind, tt.v); got != tt.want {
			t.Errorf("Format(%v, %v) = %s, want %s", tt.kind, tt.v, got, tt.want)
		}
	}
}

// TestJUnitShape reads the XML back with the element and attribute names
// of Jenkins' junit-10.xsd and GitLab's parser.
func TestJUnitShape(t *testing.T) {
	objs, _ := Parse("p99<50ms,connect_errors==0")
	rs := Evaluate(objs, []Step{
		{Name: "s1", Figures: map[string]float64{"p99": 63.2, "connect_errors": 0}},
		{Name: "s2", Figures: map[string]float64{"p99": 1}, Saturated: "send lag"},
	})
	var b bytes.Buffer
	err := WriteJUnit(&b, []Suite{{Name: "loadtest run.csv", Timestamp: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC), Duration: 1500 * time.Millisecond, Results: rs}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), `<?xml version="1.0" encoding="UTF-8"?>`) {
		t.Errorf("no XML header: %s", b.String())
	}
	var doc struct {
		XMLName xml.Name `xml:"testsuites"`
		Tests   int      `xml:"tests,attr"`
		Fails   int      `xml:"failures,attr"`
		Errors  int      `xml:"errors,attr"`
		Suites  []struct {
			Name      string `xml:"name,attr"`
			Tests     int    `xml:"tests,attr"`
			Failures  int    `xml:"failures,attr"`
			Errors    int    `xml:"errors,attr"`
			Time      string `xml:"time,attr"`
			Timestamp string `xml:"timestamp,attr"`
			Cases     []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tests != 4 || doc.Fails != 1 || doc.Errors != 2 || len(doc.Suites) != 1 {
		t.Fatalf("totals: %+v\n%s", doc, b.String())
	}
	s := doc.Suites[0]
	if s.Name != "loadtest run.csv" || s.Tests != 4 || s.Failures != 1 || s.Errors != 2 || s.Time != "1.500" || s.Timestamp != "2026-11-24T12:00:00" {
		t.Errorf("suite: %+v", s)
	}
	c := s.Cases[0]
	if c.Name != "s1: p99<50ms" || c.Classname != "scalechat.slo.s1" || c.Failure == nil ||
		c.Failure.Type != "slo-missed" || c.Failure.Message != "p99 = 63.2ms, not < 50ms" || !strings.Contains(c.Failure.Text, "measured 63.2ms") {
		t.Errorf("missed case: %+v", c)
	}
	if s.Cases[1].Error == nil || !strings.Contains(s.Cases[1].Error.Message, "saturated") {
		t.Errorf("inconclusive case: %+v", s.Cases[1])
	}
	if s.Cases[2].Name != "s1: connect_errors==0" || s.Cases[2].Failure != nil || s.Cases[2].Error != nil {
		t.Errorf("met case: %+v", s.Cases[2])
	}
}

// TestStepNamedOnce: an objective that names its step is printed, and
// named in JUnit, with the step once ("SLO big p99.9<100ms", not "SLO big
// big:p99.9<100ms"), like one that names none.
func TestStepNamedOnce(t *testing.T) {
	objs, err := Parse("p99<50ms,big:p99.9<100ms")
	if err != nil {
		t.Fatal(err)
	}
	rs := Evaluate(objs, []Step{
		{Name: "small", Figures: map[string]float64{"p99": 3, "p99.9": 5}},
		{Name: "big", Figures: map[string]float64{"p99": 60, "p99.9": 76.351}},
	})
	var out bytes.Buffer
	Print(&out, rs)
	want := `SLO small p99<50ms: MET (p99 = 3ms, < 50ms)
SLO big p99<50ms: MISSED (p99 = 60ms, not < 50ms)
SLO big p99.9<100ms: MET (p99.9 = 76.351ms, < 100ms)
SLO verdict: MISSED (2 met, 1 missed, 0 inconclusive)
`
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
	var x bytes.Buffer
	if err := WriteJUnit(&x, []Suite{{Name: "run", Results: rs}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(x.String(), `<testcase name="big: p99.9&lt;100ms"`) || strings.Contains(x.String(), "big:p99.9") {
		t.Errorf("JUnit names the step twice:\n%s", x.String())
	}
	// The objective as written stays in the results (meta.json, summary.json).
	if rs[2].SLO != "big:p99.9<100ms" || Bare(rs[2]) != "p99.9<100ms" || Bare(rs[0]) != "p99<50ms" {
		t.Errorf("results %q, %q", rs[2].SLO, rs[0].SLO)
	}
}
