package report

import (
	"encoding/json"
	"html/template"
	"strings"
	"testing"
)

func TestFmtBytes(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1536, "1.5 KiB"},
		{1023.9 * 1024, "1 MiB"}, // rounds up to the next unit, not 1024 KiB
		{50 * 1024 * 1024, "50 MiB"},
		{25276502016, "23.5 GiB"},
		{3 << 40, "3 TiB"},
		{-2048, "-2 KiB"},
	} {
		if got := fmtBytes(tc.in); got != tc.want {
			t.Errorf("fmtBytes(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFmtCount(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{7, "7"},
		{9999, "9999"},
		{12345, "12.3 k"},
		{999_960, "1 M"},
		{1_200_000, "1.2 M"},
		{1_234_567, "1.23 M"},
		{25276502016, "25.3 G"},
		{-45_000, "-45 k"},
	} {
		if got := fmtCount(tc.in); got != tc.want {
			t.Errorf("fmtCount(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFmtNumberAndPct(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{fmtNumber(3), "3"},
		{fmtNumber(0.25), "0.25"},
		{fmtNumber(1.23456), "1.235"},
		{fmtNumber(1234.567), "1235"},
		{fmtNumber(123456.7), "123 k"},
		{fmtNumber(2.5276502016e+10), "25.3 G"},
		{fmtNumber(1e-7), "1e-07"},
		{fmtPct(1), "100%"},
		{fmtPct(0), "0%"},
		{fmtPct(0.5), "50%"},
		{fmtPct(0.98765), "98.77%"},
		{fmtPct(0.99999), "99.999%"}, // never 100% short of every delivery
		{fmtPct(0.0000012), "0.0001%"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestCountCell(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want template.HTML
	}{
		{int64(42), "42"},
		{3, "3"},
		{int64(1_234_567), `<span title="1234567">1.23 M</span>`},
		{uint64(20_000), `<span title="20000">20 k</span>`},
	} {
		got, err := count(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("count(%v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := count("7"); err == nil {
		t.Error("count of a string: no error")
	}
}

func TestValueHTML(t *testing.T) {
	type pct struct {
		P50 float64 `json:"p50"`
		P90 float64 `json:"p90"`
		P99 float64 `json:"p99"`
		Max float64 `json:"max"`
	}
	type step struct {
		Name      string   `json:"name"`
		MemBytes  uint64   `json:"memory_bytes"`
		Sent      int64    `json:"sent"`
		Ratio     float64  `json:"delivery_ratio"`
		LatencyMs pct      `json:"latency_ms"`
		Tags      []string `json:"tags"`
		Saturated bool     `json:"saturated"`
		At        string   `json:"at"`
	}
	fs, err := fieldsOf(step{Name: "s1", MemBytes: 25276502016, Sent: 1_200_000, Ratio: 0.99999, LatencyMs: pct{0.34, 0.5, 0.9, 1.07},
		Tags: []string{"a", "b"}, Saturated: true, At: "2025-11-21T10:00:00.5Z"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	got := map[string]string{}
	for _, f := range fs {
		keys = append(keys, f.Key)
		got[f.Key] = string(valueHTML(f.Key, f.Val))
	}
	if strings.Join(keys, ",") != "name,memory_bytes,sent,delivery_ratio,latency_ms,tags,saturated,at" {
		t.Errorf("fields out of their order: %v", keys)
	}
	for _, tc := range []struct{ key, want string }{
		{"name", "s1"},
		{"memory_bytes", "23.5 GiB"},
		{"sent", "1.2 M"},
		{"delivery_ratio", "99.999%"},
		// Members in their order, each in its unit.
		{"latency_ms", `<table class="nested"><tr><th>p50</th><td>0.34 ms</td></tr><tr><th>p90</th><td>0.5 ms</td></tr>` +
			`<tr><th>p99</th><td>0.9 ms</td></tr><tr><th>max</th><td>1.07 ms</td></tr></table>`},
		{"tags", "a b"},
		{"saturated", "yes"},
		{"at", "2025-11-21 10:00:00.500 UTC"},
	} {
		if got[tc.key] != tc.want {
			t.Errorf("%s: %q, want %q", tc.key, got[tc.key], tc.want)
		}
	}
	if v := valueHTML("x", "<b>"); v != "&lt;b&gt;" {
		t.Errorf("text not escaped: %q", v)
	}
	if v := valueHTML("x", json.Number("1e400")); v != "1e400" {
		t.Errorf("a number too large for a float: %q", v)
	}
}

func TestDecadeTicks(t *testing.T) {
	labels := func(lo, hi float64) string {
		var l []string
		for _, tk := range (decadeTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				l = append(l, tk.Label)
			}
		}
		return strings.Join(l, " ")
	}
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{0.001, 1000, "0.001 0.01 0.1 1 10 100 1000"},
		{0.1, 10, "0.1 0.2 0.5 1 2 5 10"}, // two decades: 2 and 5 labelled too
		{0.5, 3, "0.5 1 2"},
		{1, 1e7, "1 10 100 1000 10000 100k 1M 10M"},
		{0.0003, 0.9, "0.001 0.01 0.1"}, // gonum's LogTicks begins at int(log10(lo)): 0.0001's decade is missed below 1
		{1, 1, ""},
		{0, 10, ""},
	} {
		if got := labels(tc.lo, tc.hi); got != tc.want {
			t.Errorf("Ticks(%v, %v) labels %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
	// Between two decades, eight unlabelled ticks.
	if n := len((decadeTicks{}).Ticks(1, 1000)); n != 3*9+1 {
		t.Errorf("%d ticks on 1 … 1000, want 28", n)
	}
}

func TestLogAxisReachesDecades(t *testing.T) {
	p := newPlot("", "", "", false)
	for _, tc := range []struct{ lo, hi, min, max float64 }{
		{0.3, 42, 0.1, 100},
		{0.0005, 0.002, 0.0001, 0.01},
		{10, 10, 10, 100},
	} {
		logAxis(&p.Y, tc.lo, tc.hi)
		if p.Y.Min != tc.min || p.Y.Max != tc.max {
			t.Errorf("logAxis(%v, %v): %v … %v, want %v … %v", tc.lo, tc.hi, p.Y.Min, p.Y.Max, tc.min, tc.max)
		}
	}
}
