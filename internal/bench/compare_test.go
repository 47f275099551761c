//go:build linux

package bench

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/testsupport"
)

func TestCheckTargets(t *testing.T) {
	ok := loadtest.Target{Name: "a", Protocol: "legacy", URL: "ws://127.0.0.1:1/ws"}
	for _, tt := range []struct {
		name    string
		targets []loadtest.Target
		want    string
	}{
		{"none", nil, "no targets"},
		{"unnamed", []loadtest.Target{{URL: "ws://x"}}, "a name of its own"},
		{"twice", []loadtest.Target{ok, ok}, "a name of its own"},
		{"no url", []loadtest.Target{{Name: "a"}}, "url is required"},
		{"both", []loadtest.Target{{Name: "a", URL: "ws://x", Command: []string{"x"}, PID: 1}}, "not both"},
	} {
		err := checkTargets(tt.targets)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if err := checkTargets([]loadtest.Target{ok}); err != nil {
		t.Errorf("valid target: %v", err)
	}
}

// TestCompareSmoke runs the shipped example (scalechat serve beside the
// five-field server) at smoke size, draws its report and opens the report
// in headless Chromium: the charts load, the table has both targets, and a
// screenshot of the page shows them.
func TestCompareSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers and two load generators")
	}
	exe := buildScalechat(t)
	out, rep := filepath.Join(t.TempDir(), "compare"), filepath.Join(t.TempDir(), "report")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stdout, err := exec.CommandContext(ctx, exe, "bench", "compare", "--smoke", "--out", out, filepath.Join("..", "..", "scenarios", "compare.yaml")).CombinedOutput()
	t.Logf("%s", stdout)
	if err != nil {
		t.Fatalf("bench compare: %v", err)
	}
	res, err := results.ReadTargets(filepath.Join(out, results.TargetsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 {
		t.Fatalf("%d rows, want 2 targets × 2 steps", len(res.Rows))
	}
	for _, r := range res.Rows {
		if r.Ratio != 1 || r.Received == 0 || r.Unexpected != 0 || r.Errors != 0 || r.RSS == 0 {
			t.Errorf("row %+v", r)
		}
	}
	if b, err := exec.CommandContext(ctx, exe, "report", "--out", rep, out).CombinedOutput(); err != nil || !strings.Contains(string(b), "wrote 4 charts") {
		t.Fatalf("report: %v\n%s", err, b)
	}

	browser := testsupport.NewBrowser(t, time.Minute)
	if err := chromedp.Do(browser, chromedp.Navigate("file://"+filepath.Join(rep, "index.html"))); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Images int      `json:"images"`
		Broken []string `json:"broken"`
		Rows   []string `json:"rows"`
	}
	got, err := chromedp.Run(browser, chromedp.Evaluate[page](`new Promise(resolve => {
		const all = Array.from(document.images);
		Promise.all(all.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; }))).then(() => resolve({
			images: all.length,
			broken: all.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
			rows: Array.from(document.querySelectorAll('#targets tr td:first-child')).map(td => td.textContent)}));
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got.Images != 4 || len(got.Broken) != 0 || strings.Join(got.Rows, ",") != "scalechat,scalechat,five-field,five-field" {
		t.Errorf("page: %+v", got)
	}
	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	checkScreenshot(t, shot)
}

// checkScreenshot checks that a full-page screenshot is a tall page with
// the charts' colours in it, not a blank or broken one.
func checkScreenshot(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		// FullScreenshot with a quality below 100 is a JPEG.
		if !bytes.HasPrefix(b, []byte{0xff, 0xd8}) {
			t.Fatalf("screenshot is neither PNG nor JPEG: %v", err)
		}
		img, err = decodeJPEG(b)
		if err != nil {
			t.Fatal(err)
		}
	}
	r := img.Bounds()
	if r.Dx() < 1000 || r.Dy() < 4*500 {
		t.Errorf("screenshot %d×%d: want the whole page with its four charts", r.Dx(), r.Dy())
	}
	colours := map[[3]uint32]bool{}
	for y := r.Min.Y; y < r.Max.Y; y += 7 {
		for x := r.Min.X; x < r.Max.X; x += 7 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			colours[[3]uint32{cr >> 12, cg >> 12, cb >> 12}] = true
		}
	}
	if len(colours) < 20 {
		t.Errorf("screenshot has %d colours: a blank page?", len(colours))
	}
}

func decodeJPEG(b []byte) (image.Image, error) { return jpeg.Decode(bytes.NewReader(b)) }

// TestCompareDeadTargets runs a comparison where one target works, one is a
// URL nobody listens on and one is a command that exits at once: the bench
// still measures the live one, exits non-zero, and says which targets
// measured nothing and why, in the printed table, targets.json,
// targets.csv, the report's page (a warning, "–" for latencies) and its
// charts ("no data").
func TestCompareDeadTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and three load generators")
	}
	exe := buildScalechat(t)
	dir := t.TempDir()
	scenario := filepath.Join(dir, "dead.yaml")
	if err := os.WriteFile(scenario, []byte(`name: dead-targets
steps:
  - {name: s1, rooms: 2, room_size: 3, msg_frequency: 200ms, duration: 1s, drain: 1s, ramp: 1000}
targets:
  - name: live
    protocol: scalechat
    url: ws://127.0.0.1:{port}/ws
    command: ["{scalechat}", "serve", "--addr", "127.0.0.1:{port}", "--metrics-addr", "", "--log-level", "warn"]
    ready: http://127.0.0.1:{port}/readyz
  - name: nobody
    protocol: scalechat
    url: ws://127.0.0.1:{port}/ws
  - name: quits
    protocol: scalechat
    url: ws://127.0.0.1:{port}/ws
    command: ["true"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, rep := filepath.Join(dir, "compare"), filepath.Join(dir, "report")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "bench", "compare", "--out", out, scenario)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("bench compare with dead targets: %v, want a non-zero exit", err)
	}
	if !strings.Contains(stderr.String(), "nobody, quits failed or measured nothing") {
		t.Errorf("the error does not name the failed targets")
	}
	for _, want := range []string{"WARNING: target nobody, step s1: FAILED: connected nobody", "WARNING: target quits: FAILED: "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if strings.Contains(stdout.String(), "WARNING: target live") {
		t.Errorf("the live target is reported as failed")
	}
	for line := range strings.Lines(stdout.String()) {
		// p50, p99, max, CPU/delivery and RSS/conn: unmeasured, not 0.
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "nobody" || f[0] == "quits") && strings.Count(line, "–") != 5 {
			t.Errorf("a failed row without – for its 5 unmeasured figures: %q", line)
		}
	}
	res, err := results.ReadTargets(filepath.Join(out, results.TargetsJSON))
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string]string{}
	liveCPU, liveShort := false, false
	for _, r := range res.Rows {
		liveCPU = liveCPU || r.Target == "live" && r.CPUPerDelivery > 0
		// At smoke sizes the live server's CPU may hold fewer than 10
		// clock ticks: its CPU/delivery is then "–" with the reason.
		liveShort = liveShort || r.Target == "live" && r.CPUDeliveryTooFew
		if r.Target == "live" && r.CPUDeliveryTooFew != (r.CPUPerDelivery == 0) {
			t.Errorf("live row: CPU/delivery %v, withheld %v (%s)", r.CPUPerDelivery, r.CPUDeliveryTooFew, r.CPUNote)
		}
		notes[r.Target] = r.Note
		if r.Target == "live" && (r.Received == 0 || r.Failure() != "") {
			t.Errorf("live row %+v", r)
		}
	}
	if !strings.HasPrefix(notes["nobody"], "FAILED: connected nobody") || !strings.Contains(notes["nobody"], "connection errors") ||
		!strings.HasPrefix(notes["quits"], "FAILED: ") || notes["live"] != "" {
		t.Errorf("notes %q", notes)
	}
	csvFile, err := os.ReadFile(filepath.Join(out, results.TargetsCSV))
	if err != nil || !strings.Contains(string(csvFile), "FAILED: connected nobody") {
		t.Errorf("targets.csv has no failed note: %v\n%s", err, csvFile)
	}

	if b, err := exec.CommandContext(ctx, exe, "report", "--out", rep, out).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	page, err := os.ReadFile(filepath.Join(rep, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	warn, table, ok := strings.Cut(html, `<table id="targets">`)
	if !ok || !strings.Contains(warn, `id="failed"`) || !strings.Contains(warn, "<b>nobody</b>, step s1: connected nobody") ||
		!strings.Contains(warn, "<b>quits</b>: the run failed") {
		t.Errorf("no warning naming the failed targets above the table")
	}
	for _, row := range strings.Split(table, "<tr>")[2:] {
		live := strings.HasPrefix(row, "<td>live</td>")
		liveDashes := 0
		if liveShort {
			liveDashes = 1
		}
		if dashes := strings.Count(row, "<td>–</td>"); live && dashes != liveDashes || !live && dashes != 6 {
			t.Errorf("row with %d dashes (want 6 for a failed row: 4 latencies, CPU/delivery, memory/conn): %s", dashes, row)
		}
	}
	for _, chart := range []string{"targets_latency", "targets_cpu", "targets_memory", "targets_throughput"} {
		svg, err := os.ReadFile(filepath.Join(rep, chart+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		// Both dead targets, in every bar of the step: 4 bars of latency, 1
		// otherwise (nobody's server has no process to sample: no memory).
		// The live target's few deliveries may cost fewer than 10 clock
		// ticks of CPU: then its CPU bar has no data too.
		want := 2
		switch {
		case chart == "targets_latency":
			want = 8
		case chart == "targets_cpu" && !liveCPU:
			want = 3
		}
		if n := strings.Count(string(svg), "no data"); n != want {
			t.Errorf("%s.svg: %d \"no data\" marks, want %d", chart, n, want)
		}
	}
}
