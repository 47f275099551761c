package report

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/scalechat/scalechat/internal/analyze"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// fixture writes a three-step run (the last one saturated, with a 3 s
// delivery above the 2 s cap), its meta.json and its server metrics, and
// analyses it.
func fixture(t *testing.T) *Input {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(results.EventsHeader + "\n")
	t0 := int64(1_763_719_200_000_000)
	for si, step := range []string{"s1", "s2", "s3"} {
		base := t0 + int64(si)*60_000_000
		clients := 4 * (si + 1)
		for c := range clients {
			fmt.Fprintf(&b, "%s,room-%d,,,%d,Joined,%d,\n", step, c%2, 100*si+c, base)
		}
		for m := range 20 {
			due := base + 1_000_000 + int64(m)*500_000
			sender := 100*si + m%clients
			fmt.Fprintf(&b, "%s,room-%d,%d,%d,%d,Sent,%d,5\n", step, sender%2, m, sender, sender, due)
			for c := range clients {
				if c%2 != sender%2 || (si == 1 && c == 3 && m%4 == 0) {
					continue
				}
				lat := int64(1000 * (si + 1) * (c + 1))
				if si == 2 && (m == 16 || m == 18) && c == 0 { // two of 120: p99 is 3 s
					lat = 3_000_000
				}
				fmt.Fprintf(&b, "%s,room-%d,%d,%d,%d,Received,%d,\n", step, sender%2, m, sender, 100*si+c, due+lat)
			}
		}
	}
	csv := filepath.Join(dir, "run.csv")
	if err := os.WriteFile(csv, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	meta := `{"tool":"scalechat loadtest","version":"v0.1.0","args":["--rooms","2"],
	"machine":{"hostname":"lab1","cores":2,"memory_bytes":25276502016},"parts":["run.csv"],"server_metrics":"run.server.csv",
	"steps":[{"name":"s1","rooms":2,"saturated":false,"sent":1200000,"latency_ms":{"p50":0.34,"p90":0.5,"p99":0.9,"max":1.07}},{"name":"s2","rooms":2,"saturated":false},
	{"name":"s3","rooms":2,"saturated":true,"saturation_reason":"generator CPU 95%"}]}`
	if err := os.WriteFile(filepath.Join(dir, "run.meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	var s strings.Builder
	s.WriteString(results.ServerHeader + "\n")
	for i := range 200 {
		fmt.Fprintf(&s, "%d,http://127.0.0.1:9090/metrics,%g,%d,12,%d,%d,0.2,%g\n", t0+int64(i)*1_000_000, 0.3*float64(i), 50_000_000+i*10_000, i*5, i*40, 0.5+float64(i%7))
	}
	// A node's first scrape has no processing percentiles: drawn without them.
	fmt.Fprintf(&s, "%d,http://127.0.0.1:9091/metrics,0.1,40000000,3,0,0,,\n", t0)
	s.WriteString("garbage,row\n")
	if err := os.WriteFile(filepath.Join(dir, "run.server.csv"), []byte(s.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := analyze.Run(context.Background(), analyze.Options{Inputs: []analyze.Input{{Path: csv}}})
	if err != nil {
		t.Fatal(err)
	}
	mp, err := analyze.FindMeta([]string{csv})
	if err != nil {
		t.Fatal(err)
	}
	if err := analyze.AttachMeta(res, mp); err != nil {
		t.Fatal(err)
	}
	in := &Input{Summary: &res.Summary, Series: res.Series}
	if err := in.LoadServer(); err != nil {
		t.Fatal(err)
	}
	if len(in.Server) != 201 || in.ServerMalformed != 1 {
		t.Fatalf("server rows %d, malformed %d", len(in.Server), in.ServerMalformed)
	}
	return in
}

var allCharts = []string{"latency_percentiles", "percentiles_by_step", "mean_stddev", "sent_received",
	"deliveries_over_time", "p99_over_time", "server_cpu", "server_memory", "server_processing"}

func writeReport(t *testing.T) string {
	t.Helper()
	in := fixture(t)
	out := t.TempDir()
	if err := results.WriteSummary(out, in.Summary, in.Series); err != nil {
		t.Fatal(err)
	}
	charts, err := Write(in, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) != len(allCharts) {
		t.Fatalf("%d charts, want %d", len(charts), len(allCharts))
	}
	return out
}

func TestReportFiles(t *testing.T) {
	out := writeReport(t)
	for _, name := range allCharts {
		b, err := os.ReadFile(filepath.Join(out, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s.png: %v", name, err)
		}
		if img.Bounds() != image.Rect(0, 0, PNGWidth, PNGHeight) {
			t.Errorf("%s.png is %v, want %dx%d", name, img.Bounds(), PNGWidth, PNGHeight)
		}
		if inked(img) < 0.005 {
			t.Errorf("%s.png is nearly blank (%.4f inked)", name, inked(img))
		}
		svg, err := os.ReadFile(filepath.Join(out, name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		// 16 × 9 in = 1152 × 648 pt.
		if !bytes.Contains(svg, []byte(`width="1152pt" height="648pt"`)) || !bytes.Contains(svg, []byte("<path")) {
			t.Errorf("%s.svg: no 1152×648pt drawing: %.200s", name, svg)
		}
	}
	html, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllSubmatch(html, -1)
	if len(links) < 3*len(allCharts) {
		t.Fatalf("index.html has %d links", len(links))
	}
	for _, l := range links {
		ref := string(l[1])
		if strings.Contains(ref, "://") || strings.HasPrefix(ref, "//") || strings.HasPrefix(ref, "/") {
			t.Errorf("index.html links outside the folder: %s", ref)
			continue
		}
		if _, err := os.Stat(filepath.Join(out, ref)); err != nil {
			t.Errorf("index.html link %s: %v", ref, err)
		}
	}
	for _, want := range []string{"Warning: step s3: the load generator was saturated (generator CPU 95%)",
		"<dt>hostname</dt><dd>lab1</dd>", "--rooms 2", `<tr class="saturated"><td>s3</td>`} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}

// inked is the share of pixels that are not white.
func inked(img image.Image) float64 {
	n, b := 0, img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			if c := color.GrayModel.Convert(img.At(x, y)).(color.Gray); c.Y < 240 {
				n++
			}
		}
	}
	return float64(n) / float64((b.Dx()/3+1)*(b.Dy()/3+1))
}

// TestReportInBrowser opens index.html in headless Chromium and checks
// every image loaded.
func TestReportInBrowser(t *testing.T) {
	out := writeReport(t)
	ctx := testsupport.NewBrowser(t, 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+filepath.Join(out, "index.html"))); err != nil {
		t.Fatal(err)
	}
	type imgs struct {
		Total  int      `json:"total"`
		Broken []string `json:"broken"`
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[imgs](`new Promise(resolve => {
		const all = Array.from(document.images);
		Promise.all(all.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; }))).then(() =>
			resolve({total: all.length, broken: all.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)}));
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got.Total != len(allCharts) || len(got.Broken) != 0 {
		t.Errorf("images: %d (want %d), broken %q", got.Total, len(allCharts), got.Broken)
	}
	warn, err := chromedp.Run(ctx, chromedp.Text(".warn"))
	if err != nil || !strings.Contains(warn, "s3") {
		t.Errorf("no visible warning for s3: %q %v", warn, err)
	}
}

func TestLatencyCapCut(t *testing.T) {
	in := fixture(t)
	// s3 has 120 deliveries, two of 3 s: its p99 (rank 119) is 3 s.
	if s3 := in.Summary.Steps[2]; s3.P99 != 3000 {
		t.Fatalf("fixture: s3 p99 = %v ms, want 3000", s3.P99)
	}
	names, v := percentileBars(&in.Summary.Steps[2].Latency)
	if names[len(names)-1] != "p99" || v[len(v)-1] != 3000 || len(names) != 11 {
		t.Errorf("bars %v %v", names, v)
	}
}

// TestExploreInBrowser drives the interactive chart in headless Chromium:
// a line per step, the values under the pointer, a zoom, the p99 metric.
func TestExploreInBrowser(t *testing.T) {
	out := writeReport(t)
	ctx := testsupport.NewBrowser(t, 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+filepath.Join(out, "index.html"))); err != nil {
		t.Fatal(err)
	}
	type state struct {
		Paths []string `json:"paths"`
		Tip   string   `json:"tip"`
		Ticks []string `json:"ticks"`
		Label string   `json:"label"`
	}
	read := `(() => {
		const svg = document.querySelector("#explore svg");
		return {paths: Array.from(svg.querySelectorAll("path")).map(p => p.dataset.step + " " + p.getAttribute("d").split("L").length),
			tip: document.querySelector("#explore .tip").textContent,
			ticks: Array.from(svg.querySelectorAll("text")).map(e => e.textContent),
			label: svg.querySelectorAll("text")[0].textContent};
	})()`
	// Hover over the middle of s1's time span (the first of the plot's 22 s
	// of width): the tip names s1 and a rate.
	hover := `(() => {
		const svg = document.querySelector("#explore svg"), r = svg.getBoundingClientRect();
		const px = x => r.left + x / 1200 * r.width;
		svg.dispatchEvent(new MouseEvent("mousemove", {clientX: px(70 + 0.05 * 1110), clientY: r.top + r.height / 2, bubbles: true}));
	})()`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[state](hover+";"+read))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Paths) != 3 || !strings.HasPrefix(got.Paths[0], "s1 ") || !strings.Contains(got.Tip, "s1 @") || !strings.Contains(got.Tip, "/s") {
		t.Fatalf("explore chart: %+v", got)
	}
	full := got.Paths
	// Zoom into s2's minute: s1 and s3 leave the plot, s2 keeps its points.
	zoomed, err := chromedp.Run(ctx, chromedp.Evaluate[state](`window.exploreZoom(60, 80);`+read))
	if err != nil {
		t.Fatal(err)
	}
	if zoomed.Paths[0] != "s1 1" || zoomed.Paths[1] != full[1] || zoomed.Paths[2] != "s3 1" {
		t.Errorf("zoom 60 … 80 s: paths %q (full run %q)", zoomed.Paths, full)
	}
	p99, err := chromedp.Run(ctx, chromedp.Evaluate[state](`document.querySelector('[data-metric="p99"]').click();`+read))
	if err != nil {
		t.Fatal(err)
	}
	// s2's p99 is 16 ms (2 … 16 ms): a log axis from 10 to 100 ms.
	if !strings.Contains(p99.Label, "p99") || !slices.Contains(p99.Ticks, "10") || !slices.Contains(p99.Ticks, "100") {
		t.Errorf("p99 view: label %q ticks %q", p99.Label, p99.Ticks)
	}
}

// TestHTMLUnmeasuredStep: the page shows "–", not 0 ms, for the latencies
// of a step with no delivery.
func TestHTMLUnmeasuredStep(t *testing.T) {
	lat := results.Latency{P50: 1.5, P90: 2, P99: 2, P999: 2, Max: 2, Mean: 1.7, Stddev: 0.2}
	in := &Input{Summary: &results.Summary{Steps: []results.StepStats{
		{Step: "ok", Sent: 1, Expected: 2, Received: 2, Latency: lat},
		{Step: "dead", Sent: 1, Expected: 2},
	}, Overall: results.StepStats{Step: "all", Sent: 2, Expected: 4, Received: 2, Latency: lat}}}
	var b strings.Builder
	if err := runTmpl.Execute(&b, runPage(in, nil)); err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, row := range strings.Split(b.String(), "<tr") {
		for _, name := range []string{"ok", "dead", "<b>all</b>"} {
			if strings.Contains(row, "<td>"+name+"</td>") {
				rows[name] = strings.Count(row, "<td>–</td>")
			}
		}
	}
	if rows["dead"] != 7 || rows["ok"] != 0 || rows["<b>all</b>"] != 0 || len(rows) != 3 {
		t.Errorf("dashes per row %v, want 7 for the dead step only", rows)
	}
}
