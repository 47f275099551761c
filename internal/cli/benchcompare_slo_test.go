//go:build linux

package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
)

// TestJudgeTargets judges a comparison's targets.json (what bench compare
// wrote) against objectives: a step per target and step, a JUnit testsuite
// per target, the exit code of the worst verdict. (Running bench compare
// itself needs the built binary: internal/bench's tests do.)
func TestJudgeTargets(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tg := results.Targets{Tool: "scalechat bench compare", StartedAt: t0, EndedAt: t0.Add(time.Minute), Targets: []string{"ours", "theirs"},
		Rows: []results.TargetRow{
			{Target: "ours", Step: "s1", Expected: 100, Received: 100, P50: 0.5, P90: 1, P99: 2, Max: 3, CPUPerDelivery: 4},
			{Target: "theirs", Step: "s1", Expected: 100, Received: 90, P50: 5, P90: 9, P99: 40, Max: 90, CPUPerDelivery: 25},
			{Target: "slow", Step: "s1", Expected: 100, Received: 100, P99: 1, Saturated: true, Note: "generator saturated"},
		}}
	b, _ := json.Marshal(tg)
	if err := os.WriteFile(filepath.Join(dir, results.TargetsJSON), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		slo   string
		code  int
		cases int
	}{
		{"ours/s1:p99<5ms,ours/s1:cpu_per_delivery<10us", 0, 2},
		{"p99<5ms", exitMissed, 2}, // slow is not among tg.Targets' suites
		{"slow/s1:p99<5ms", exitInconclusive, 0},
		{"delivery>=99%,cpu_per_delivery<20us", exitMissed, 4},
	}
	for _, tt := range tests {
		t.Run(tt.slo, func(t *testing.T) {
			sf := sloFlags{exprs: []string{tt.slo}, junit: filepath.Join(dir, "j.xml"), inconclusive: "fail"}
			if err := sf.parse(); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			err := judgeTargets(&out, dir, &sf)
			code := 0
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.code
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d (%v)\n%s", code, tt.code, err, out.String())
			}
			if n := len(junitCases(t, sf.junit)); n != tt.cases {
				t.Errorf("%d testcases, want %d", n, tt.cases)
			}
			if !strings.Contains(out.String(), "SLO verdict: ") {
				t.Errorf("no verdict printed:\n%s", out.String())
			}
		})
	}
	// The last verdicts are in targets.json, and on the report's page.
	back, err := results.ReadTargets(filepath.Join(dir, results.TargetsJSON))
	if err != nil || len(back.SLO) != 6 || back.SLO[2].Step != "slow/s1" || back.SLO[1].Verdict != "missed" {
		t.Errorf("targets.json slo: %+v (%v)", back.SLO, err)
	}
	rep := filepath.Join(t.TempDir(), "report")
	if code, _, stderr := runCLI("report", "--out", rep, dir); code != 0 {
		t.Fatalf("report: %d %s", code, stderr)
	}
	page, _ := os.ReadFile(filepath.Join(rep, "index.html"))
	if !strings.Contains(string(page), `<table id="slo">`) || !strings.Contains(string(page), "SLO missed: step theirs/s1, delivery&gt;=99%") {
		t.Errorf("the report's page does not show the SLOs")
	}
	sf := sloFlags{exprs: []string{"mine/s1:p99<5ms"}, inconclusive: "fail"}
	_ = sf.parse()
	if err := judgeTargets(&strings.Builder{}, dir, &sf); err == nil || !strings.Contains(err.Error(), `names step "mine/s1"`) {
		t.Errorf("an objective naming no target's step: %v", err)
	}
}

func TestFromTargetUnits(t *testing.T) {
	s := slo.FromTarget(results.TargetRow{Target: "a", Step: "s1", Expected: 10, Received: 10, P99: 2, CPUPerDelivery: 20})
	if s.Name != "a/s1" || s.Figures["cpu_per_delivery"] != 0.02 || s.Figures["p99"] != 2 || s.Figures["delivery"] != 1 {
		t.Errorf("figures %+v", s)
	}
}
