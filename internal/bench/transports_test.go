//go:build linux

package bench

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// TestTransportsEndToEnd builds scalechat, runs `scalechat bench transports
// --smoke` (10 and 20 clients over the three transports, each against a
// fresh server process) and draws its report with `scalechat report`.
func TestTransportsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 6 servers and 6 load generators")
	}
	exe := filepath.Join(t.TempDir(), "scalechat")
	build := exec.Command("go", "build", "-o", exe, "github.com/scalechat/scalechat/cmd/scalechat")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "cmp")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "bench", "transports", "--smoke", "--out", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("bench transports: %v", err)
	}
	rows, bad, err := results.ReadComparison(filepath.Join(dir, results.ComparisonCSV))
	if err != nil || bad != 0 || len(rows) != 6 {
		t.Fatalf("transports.csv: %d rows, %d malformed, %v", len(rows), bad, err)
	}
	bytesOf := map[string]int64{}
	var cpu float64
	for i, r := range rows {
		if r.Transport != results.TransportNames[i%3] || r.Clients != 10*(1+i/3) {
			t.Errorf("row %d is %s with %d clients", i, r.Transport, r.Clients)
		}
		if r.Sent != int64(r.Clients) || r.Received != r.Sent || r.Errors != 0 || r.Timeouts != 0 {
			t.Errorf("%s %d: %+v", r.Transport, r.Clients, r)
		}
		if r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 || r.Max > 3000 {
			t.Errorf("%s %d: latencies %+v", r.Transport, r.Clients, r)
		}
		if r.ServerCPU < 0 || r.BytesIn <= 0 || r.BytesOut <= 0 {
			t.Errorf("%s %d: server CPU %v s, bytes %d in, %d out", r.Transport, r.Clients, r.ServerCPU, r.BytesIn, r.BytesOut)
		}
		cpu += r.ServerCPU // in ticks of 10 ms: one small run may show 0
		bytesOf[r.Transport] += r.BytesIn + r.BytesOut
	}
	if cpu <= 0 {
		t.Error("the servers used no CPU time")
	}
	// Polling every 500 ms moves more bytes than one WebSocket frame each way.
	if bytesOf[results.Polling] <= bytesOf[results.WebSocket] {
		t.Errorf("bytes: polling %d, websocket %d", bytesOf[results.Polling], bytesOf[results.WebSocket])
	}
	// Plain polling every 500 ms cannot answer in a few ms on average.
	if rows[2].P50 < 20 || rows[0].P50 > rows[2].P50 {
		t.Errorf("p50: websocket %.1f ms, polling %.1f ms", rows[0].P50, rows[2].P50)
	}
	m, err := results.ReadComparisonMeta(filepath.Join(dir, results.ComparisonJSON))
	if err != nil || m.Timeout != "3s" || m.LoadBefore == "" || m.LoadAfter == "" || len(m.Clients) != 2 {
		t.Errorf("transports.json: %+v %v", m, err)
	}
	for _, want := range []string{"websocket", "long-polling", "polling", "results in " + dir} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q", want)
		}
	}

	out := filepath.Join(t.TempDir(), "report")
	rep := exec.CommandContext(ctx, exe, "report", "--out", out, dir)
	if b, err := rep.CombinedOutput(); err != nil || !strings.Contains(string(b), "wrote 4 charts") {
		t.Fatalf("report: %v\n%s", err, b)
	}
	for _, name := range []string{"transports_errors", "transports_cpu", "transports_megabytes", "transports_p99"} {
		b, err := os.ReadFile(filepath.Join(out, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds() != image.Rect(0, 0, 1600, 900) {
			t.Errorf("%s.png: %v %v", name, err, img)
		}
		if st, err := os.Stat(filepath.Join(out, name+".svg")); err != nil || st.Size() < 1000 {
			t.Errorf("%s.svg: %v", name, err)
		}
	}
	if html, err := os.ReadFile(filepath.Join(out, "index.html")); err != nil || !bytes.Contains(html, []byte("transports_p99.png")) {
		t.Errorf("index.html: %v", err)
	}
}

func TestClientSteps(t *testing.T) {
	got, err := ClientSteps(100, 1000, 50)
	if err != nil || len(got) != 19 || got[0] != 100 || got[18] != 1000 {
		t.Errorf("ClientSteps(100, 1000, 50) = %v, %v", got, err)
	}
	for _, bad := range [][3]int{{0, 10, 1}, {10, 5, 1}, {1, 10, 0}} {
		if _, err := ClientSteps(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("ClientSteps%v accepted", bad)
		}
	}
}
