//go:build linux

package loadtest

import (
	"context"
	"encoding/csv"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/metrics"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/server/servertest"
)

func TestLosslessAgainstRealServer(t *testing.T) {
	url := servertest.Start(t, nil).URL("/ws")
	tests := []struct {
		name string
		step Step
	}{
		{"rooms", testStep("rooms", 10, 5)},
		{"one room", testStep("oneroom", 1, 30)},
		{"topics", func() Step { s := testStep("topics", 20, 3); s.RoomsPerClient = 5; s.RoomSkew = 0.8; return s }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, url, tt.step)
			res := runTest(t, cfg)
			if len(res.Failures) > 0 {
				t.Fatalf("failures: %v", res.Failures)
			}
			s := res.Meta.Steps[0]
			clients := int64(tt.step.Clients())
			if s.Joined != clients || s.Sent != clients*10 || s.Received != s.Expected || s.Lost != 0 {
				t.Fatalf("step %+v", s)
			}
			if tt.step.RoomsPerClient == 1 && s.Expected != s.Sent*int64(tt.step.RoomSize) {
				t.Fatalf("expected %d, want sent × room size = %d", s.Expected, s.Sent*int64(tt.step.RoomSize))
			}
			if s.Replayed != 0 || s.OutOfOrder != 0 || s.Invalid != 0 || s.ServerErrors != 0 {
				t.Errorf("anomalies %+v", s)
			}
			checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
		})
	}
}

// TestServerMetricsBesideTheCSV runs a load test with --server-metrics
// against a real server and checks <out>.server.csv: the run's messages are
// in its last row.
func TestServerMetricsBesideTheCSV(t *testing.T) {
	cfg := server.DefaultConfig()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, ln) }()
	go func() { done <- metrics.New(srv, metrics.Options{}).Serve(ctx, mln) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	})
	metricsURL := "http://" + mln.Addr().String() + "/metrics"

	step := testStep("s", 4, 5)
	step.Duration = Duration(2 * time.Second)
	lt := testConfig(t, "ws://"+ln.Addr().String()+"/ws", step)
	lt.ServerMetrics = []string{metricsURL}
	res := runTest(t, lt)
	if len(res.Failures) > 0 {
		t.Fatalf("failures: %v", res.Failures)
	}
	if res.Meta.ServerMetrics != "run.server.csv" || readMeta(t, lt.Out).ServerMetrics != "run.server.csv" {
		t.Errorf("meta names %q as the server CSV", res.Meta.ServerMetrics)
	}
	f, err := os.Open(results.ServerMetricsPath(lt.Out))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != results.ServerHeader {
		t.Fatalf("header %v", rows[0])
	}
	rows = rows[1:]
	// About one row a second of a run of 3 s or more, plus the last one.
	if len(rows) < 3 {
		t.Fatalf("%d rows", len(rows))
	}
	s := res.Meta.Steps[0]
	last := rows[len(rows)-1]
	timed := 0
	for _, r := range rows {
		if r[1] != metricsURL {
			t.Errorf("node %q", r[1])
		}
		if r[7] != "" {
			timed++
		}
	}
	// The last scrape comes after the run: the server's totals are the run's.
	if last[5] != strconv.FormatInt(s.Sent, 10) || last[6] != strconv.FormatInt(s.Received, 10) || last[4] != "0" {
		t.Errorf("last row %v; the run sent %d and received %d", last, s.Sent, s.Received)
	}
	if timed == 0 {
		t.Error("no row has a processing time")
	}
	if cpu, err := strconv.ParseFloat(last[2], 64); err != nil || cpu <= 0 {
		t.Errorf("cpu_seconds %q", last[2])
	}
	if rss, err := strconv.ParseInt(last[3], 10, 64); err != nil || rss < 1<<20 {
		t.Errorf("rss_bytes %q", last[3])
	}
}

func TestServerMetricsURLsAreChecked(t *testing.T) {
	cfg := testConfig(t, "ws://127.0.0.1:1/ws", testStep("s", 1, 1))
	cfg.ServerMetrics = []string{"127.0.0.1:8081/metrics"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "server metrics URL") {
		t.Errorf("Validate: %v", err)
	}
}
