package report

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"gonum.org/v1/plot/plotutil"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// transportsFixture writes a comparison folder: three transports at 100,
// 150 and 200 clients, polling failing at 200, and a malformed row.
func transportsFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var rows []results.ComparisonRow
	for k, tr := range results.TransportNames {
		for _, n := range []int{100, 150, 200} {
			r := results.ComparisonRow{Transport: tr, Clients: n, Sent: int64(n), Received: int64(n), P50: float64(1 + 100*k), P90: float64(2 + 150*k),
				P99: float64(3 + 200*k), Max: float64(4 + 300*k), ServerCPU: 0.01 * float64(n*(k+1)), BytesIn: int64(n * 1000 * (k + 1)), BytesOut: int64(n * 2000 * (k + 1))}
			if tr == results.Polling && n == 200 {
				r.Received, r.Errors, r.Timeouts, r.Saturated = 150, 50, 50, true
			}
			rows = append(rows, r)
		}
	}
	var b bytes.Buffer
	if err := results.WriteComparison(&b, rows); err != nil {
		t.Fatal(err)
	}
	b.WriteString("polling,x,1,1,0,0,0,0,1,1,1,1,1,1,1,false\n")
	if err := os.WriteFile(filepath.Join(dir, results.ComparisonCSV), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	meta := `{"tool":"scalechat bench transports","timeout":"11s","poll_wait":"25s","poll_interval":"500ms","msg_size":64,
	"pinning":"server on CPU 0, generator on CPU 1","loadavg_before":"0.50 0.40 0.30","loadavg_after":"1.50 0.90 0.50","machine":"lab1"}`
	if err := os.WriteFile(filepath.Join(dir, results.ComparisonJSON), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeTransportsReport(t *testing.T) string {
	t.Helper()
	in, ok, err := LoadTransports(transportsFixture(t))
	if err != nil || !ok {
		t.Fatalf("LoadTransports: %v %v", ok, err)
	}
	if len(in.Rows) != 9 || in.Malformed != 1 || in.Meta == nil || in.Meta.Timeout != "11s" {
		t.Fatalf("rows %d malformed %d meta %+v", len(in.Rows), in.Malformed, in.Meta)
	}
	out := t.TempDir()
	charts, err := WriteTransports(in, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) != 4 {
		t.Fatalf("%d charts, want 4", len(charts))
	}
	return out
}

// hasColor reports whether img holds pixels of exactly c.
func hasColor(img image.Image, c color.Color) bool {
	r0, g0, b0, _ := c.RGBA()
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 == r0>>8 && g>>8 == g0>>8 && bl>>8 == b0>>8 {
				return true
			}
		}
	}
	return false
}

func TestTransportsReportFiles(t *testing.T) {
	out := writeTransportsReport(t)
	for _, c := range transportCharts {
		b, err := os.ReadFile(filepath.Join(out, c.Name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s.png: %v", c.Name, err)
		}
		if img.Bounds() != image.Rect(0, 0, PNGWidth, PNGHeight) {
			t.Errorf("%s.png is %v, want %dx%d", c.Name, img.Bounds(), PNGWidth, PNGHeight)
		}
		if inked(img) < 0.005 {
			t.Errorf("%s.png is nearly blank (%.4f inked)", c.Name, inked(img))
		}
		// One line per transport, each in its own colour.
		for k, tr := range results.TransportNames {
			if !hasColor(img, plotutil.Color(k)) {
				t.Errorf("%s.png has no line for %s", c.Name, tr)
			}
		}
		svg, err := os.ReadFile(filepath.Join(out, c.Name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(svg, []byte(`width="1152pt" height="648pt"`)) || !bytes.Contains(svg, []byte("<path")) {
			t.Errorf("%s.svg: no 1152×648pt drawing: %.200s", c.Name, svg)
		}
		for _, tr := range results.TransportNames {
			if !bytes.Contains(svg, []byte(">"+tr+"<")) {
				t.Errorf("%s.svg has no legend entry %s", c.Name, tr)
			}
		}
	}
	html, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllSubmatch(html, -1)
	if len(links) < 3*len(transportCharts) {
		t.Fatalf("index.html has %d links", len(links))
	}
	for _, l := range links {
		ref := string(l[1])
		if strings.Contains(ref, "://") || strings.HasPrefix(ref, "/") {
			t.Errorf("index.html links outside the folder: %s", ref)
			continue
		}
		if _, err := os.Stat(filepath.Join(out, ref)); err != nil {
			t.Errorf("index.html link %s: %v", ref, err)
		}
	}
	for _, want := range []string{"the load generator was saturated", `<tr class="saturated"><td>polling</td><td>200</td>`,
		"before 0.50 0.40 0.30, after 1.50 0.90 0.50", "1 malformed rows were skipped"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}

func TestLoadTransportsIgnoresOtherInputs(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := LoadTransports(dir); ok || err != nil {
		t.Errorf("empty folder: ok %v err %v", ok, err)
	}
	other := filepath.Join(dir, "run.csv")
	os.WriteFile(other, []byte("a,b\n"), 0o644)
	if _, ok, err := LoadTransports(other); ok || err != nil {
		t.Errorf("other CSV: ok %v err %v", ok, err)
	}
	bad := filepath.Join(dir, results.ComparisonCSV)
	os.WriteFile(bad, []byte("a,b\n"), 0o644)
	if _, ok, err := LoadTransports(dir); !ok || err == nil {
		t.Errorf("wrong header: ok %v err %v", ok, err)
	}
}

// TestTransportsReportInBrowser opens the comparison's index.html in
// headless Chromium and checks its four charts load.
func TestTransportsReportInBrowser(t *testing.T) {
	out := writeTransportsReport(t)
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
	if got.Total != 4 || len(got.Broken) != 0 {
		t.Errorf("images: %d (want 4), broken %q", got.Total, got.Broken)
	}
}
