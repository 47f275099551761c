package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// writeAuditReport builds the page of an audit with a broken guarantee, a
// clean drop and a node kill.
func writeAuditReport(t *testing.T) string {
	t.Helper()
	t0 := time.Date(2025, 11, 21, 10, 0, 0, 0, time.UTC)
	a := &results.Audit{Tool: "scalechat audit", Started: t0, Ended: t0.Add(time.Minute), Clients: 40, Rooms: 4, Nodes: 2,
		Sent: 12_000, Expected: 1_234_567, Delivered: 1_234_560, UnconfirmedSends: 1,
		Faults: []results.AuditFault{
			{At: t0.Add(5 * time.Second), Kind: "drop", Target: "client 3", Recovered: 40 * time.Millisecond, RecoveredOK: true},
			{At: t0.Add(20 * time.Second), Kind: "node SIGKILL", Target: "node 1", Recovered: 1500 * time.Millisecond, RecoveredOK: true,
				AuditCounts: results.AuditCounts{Missing: 7}},
		},
		Guarantees: []results.Guarantee{{Name: "no silent loss", Held: false, What: "7 missing"}, {Name: "order", Held: true, What: "0 reordered"}},
		Broken:     true,
	}
	out := t.TempDir()
	if _, err := WriteAudit(a, Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

// writeTargetsReport builds the page of two targets over two steps.
func writeTargetsReport(t *testing.T) string {
	t.Helper()
	tg := &results.Targets{Tool: "scalechat bench compare", Scenario: "fanout", Targets: []string{"scalechat", "other"},
		StartedAt: time.Date(2025, 11, 21, 10, 0, 0, 0, time.UTC), Machine: "lab1"}
	for k, name := range tg.Targets {
		for i, step := range []string{"s1", "s2"} {
			tg.Rows = append(tg.Rows, results.TargetRow{Target: name, Protocol: "scalechat", Step: step, Clients: int64(1000 * (i + 1)), Joined: int64(1000 * (i + 1)),
				Ratio: 1, PerSecond: 123456.7, P50: 1, P90: 2, P99: 3 + float64(k), Max: 9, CPUPerDelivery: 1.5,
				RSS: 64 << 20, RSSPerConn: 6144, GeneratorCPU: 0.4, Saturated: k == 1 && i == 1})
		}
	}
	// The other target's first step: two clock ticks of CPU, withheld.
	short := &tg.Rows[2]
	short.CPUPerDelivery, short.CPUDeliveryTooFew, short.CPUNote = 0, true, results.CPUTooFew("CPU/delivery", 20*time.Millisecond)
	out := t.TempDir()
	if _, err := WriteTargets(tg, Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPagesReadable builds every kind of page and checks what a reader
// sees: no Go value syntax, numbers in human units, wide tables in a box
// that scrolls, one skeleton.
func TestPagesReadable(t *testing.T) {
	goSyntax := regexp.MustCompile(`map\[|\d\.\d+e[+-]\d\d|&\{|\+0000 UTC|m=\+`)
	pages := map[string]struct {
		dir  string
		want []string
	}{
		"run": {writeReport(t), []string{
			"<dt>memory_bytes</dt><dd>23.5 GiB</dd>",
			`<tr><th>latency_ms</th><td><table class="nested"><tr><th>p50</th><td>0.34 ms</td></tr>`,
			`<tr><th>sent</th><td>1.2 M</td>`,
			`<div class="wide"><table id="summary">`, `<div class="wide"><table id="scenario">`,
		}},
		"transports": {writeTransportsReport(t), []string{`<td>97.7 KiB</td>`, `<div class="wide"><table id="transports">`}},
		"audit": {writeAuditReport(t), []string{`<div class="warn">A delivery guarantee was BROKEN.</div>`,
			`<dd><span title="1234567">1.23 M</span></dd>`, "<dd>2025-11-21 10:00:00.000 UTC</dd>",
			`<td>node SIGKILL</td><td>node 1</td><td>1.5s</td><td>7</td>`, "1 dropped connections that recovered"}},
		"targets": {writeTargetsReport(t), []string{`<tr class="saturated"><td>other</td>`, "<td>123 k</td>", "<td>6 KiB</td>",
			`<div class="wide"><table id="targets">`, "Warning: the load generator was saturated",
			"<td>–</td><td>6 KiB</td><td>40%</td><td>CPU/delivery: – (2 CPU clock ticks of 10 ms, fewer than the 10 that read it to 10 %)</td>"}},
	}
	for name, pg := range pages {
		b, err := os.ReadFile(filepath.Join(pg.dir, "index.html"))
		if err != nil {
			t.Fatal(err)
		}
		html := string(b)
		if m := goSyntax.FindAllString(html, 5); m != nil {
			t.Errorf("%s page shows Go syntax or raw floats: %q", name, m)
		}
		for _, w := range pg.want {
			if !strings.Contains(html, w) {
				t.Errorf("%s page lacks %q", name, w)
			}
		}
		// One skeleton: the same head and footer on every page.
		if !strings.HasPrefix(html, "<!DOCTYPE html>") || strings.Count(html, "<style>") != 1 ||
			!regexp.MustCompile(`Generated \d{4}-\d\d-\d\dT[^ ]+ by scalechat report\.</p>\s*</body>\s*</html>\s*$`).MatchString(html) {
			t.Errorf("%s page is not built on the skeleton:\n%.300s … %s", name, html, html[max(0, len(html)-200):])
		}
		if !strings.Contains(html, "<h2>Charts</h2>") {
			t.Errorf("%s page has no charts", name)
		}
	}
	// The log axes, in SVG as in PNG (one plot draws both): the fixture's
	// latencies run from 1 ms to 3 s, a label at each decade.
	svg, err := os.ReadFile(filepath.Join(pages["run"].dir, "percentiles_by_step.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"1", "10", "100", "1000", "10000"} {
		if !bytes.Contains(svg, []byte(">"+d+"</text>")) {
			t.Errorf("percentiles_by_step.svg: no label %s on its log axis", d)
		}
	}
}
