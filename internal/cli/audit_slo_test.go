//go:build linux

package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// TestAuditSLO runs audit --slo against a real `scalechat serve` with
// dropped connections: a recovery no client makes misses with exit 3 and
// a JUnit failure naming it; objectives a healthy server meets pass; both
// are in audit.json and on the report's audit page.
func TestAuditSLO(t *testing.T) {
	url := serveReady(t)
	tests := []sloCase{
		{"must fail", "recovery<1ns,duplicates==0", exitMissed, map[string]string{
			"audit: recovery<1ns": "FAILED: recovery = ", "audit: duplicates==0": ""}},
		{"must pass", "recovery<30s,delivery>=99.9%,duplicates==0", 0, map[string]string{
			"audit: recovery<30s": "", "audit: delivery>=99.9%": "", "audit: duplicates==0": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			junit := filepath.Join(dir, "audit.xml")
			code, stdout, stderr := runCLI("audit", "--url", url, "--rooms", "2", "--room-size", "3", "--duration", "1s",
				"--drop-every", "200ms", "--drain", "2s", "--out", dir, "--slo", tt.slo, "--junit", junit)
			if code != tt.code || !strings.Contains(stdout, "verdict: every guarantee held") || !strings.Contains(stdout, "SLO verdict: ") {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			checkJUnit(t, junit, tt.verdicts)
			a, err := results.ReadAudit(filepath.Join(dir, results.AuditJSON))
			if err != nil {
				t.Fatal(err)
			}
			if len(a.SLO) != len(tt.verdicts) || a.SLO[0].Metric != "recovery" || a.SLO[0].Measured == nil || *a.SLO[0].Measured <= 0 {
				t.Errorf("audit.json slo: %+v", a.SLO)
			}
			rep := t.TempDir()
			if code, _, stderr := runCLI("report", "--out", rep, dir); code != 0 {
				t.Fatalf("report: %d %s", code, stderr)
			}
			page, _ := os.ReadFile(filepath.Join(rep, "index.html"))
			if !strings.Contains(string(page), `<table id="slo">`) || strings.Contains(string(page), "SLO missed: step audit") != (tt.code != 0) {
				t.Errorf("the report's audit page does not show the SLOs as judged")
			}
		})
	}
}

func TestAuditSLORefused(t *testing.T) {
	for _, tt := range []struct{ slo, want string }{
		{"p99<50ms", "SLO p99<50ms: audit does not measure p99 (it measures delivery, loss, lost, duplicates, reordered, recovery)"},
		{"s1:recovery<1s", `SLO s1:recovery<1s names step "s1", which is not in the run (steps: audit)`},
		{"recovery<2", "the time 2 needs a unit"},
	} {
		code, _, stderr := runCLI("audit", "--url", "ws://127.0.0.1:1/ws", "--slo", tt.slo)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("--slo %s: exit %d %q, want %d and %q", tt.slo, code, stderr, exitUsage, tt.want)
		}
	}
}

// TestAuditExit: a broken guarantee exits 1 without --slo, as audit
// always has, and with --slo is a failed check: exit 3 and a failed JUnit
// testcase, though every objective was met.
func TestAuditExit(t *testing.T) {
	res := &results.Audit{Expected: 10, Delivered: 9, Broken: true, AuditCounts: results.AuditCounts{Missing: 1},
		Guarantees: []results.Guarantee{{Name: "no loss", Held: false, What: "1 of 10 owed deliveries missing"}, {Name: "order", Held: true}}}
	var none sloFlags
	if err := none.auditExit(io.Discard, res, false); exitCode(err) != exitFailed {
		t.Errorf("without --slo: %v, want exit %d", err, exitFailed)
	}
	junit := filepath.Join(t.TempDir(), "audit.xml")
	sf := sloFlags{audit: true, exprs: []string{"lost<=1"}, junit: junit, inconclusive: "fail"}
	if err := sf.parse(); err != nil {
		t.Fatal(err)
	}
	sf.judgeAudit(res)
	var out strings.Builder
	err := sf.auditExit(&out, res, false)
	if exitCode(err) != exitMissed || !strings.Contains(err.Error(), "guarantee broken: no loss (1 of 10 owed deliveries missing)") ||
		!strings.Contains(out.String(), "SLO audit lost<=1: MET") {
		t.Errorf("with --slo: %v, want exit %d naming the guarantee\n%s", err, exitMissed, out.String())
	}
	if got := junitCases(t, junit); got["audit: lost<=1"] != "" || !strings.HasPrefix(got["check 1"], "FAILED: guarantee broken: no loss") {
		t.Errorf("JUnit: %v", got)
	}
}

// exitCode is the exit code err gives (0 for nil, 1 for a plain error).
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

// TestCheckStepsRun: run: names the whole run where a command judges one,
// and is refused where a step of that name makes it mean two things or
// the command judges no whole run.
func TestCheckStepsRun(t *testing.T) {
	for _, tt := range []struct {
		steps []string
		whole bool
		want  string
	}{
		{[]string{"s1", "s2"}, true, ""},
		{[]string{"s1", "run"}, true, "SLO run:p99<1s: a step is named run, which --slo reserves for the whole run"},
		{[]string{"ours/s1"}, false, `SLO run:p99<1s names step "run", which is not in the run`},
	} {
		sf := sloFlags{exprs: []string{"run:p99<1s"}, inconclusive: "fail"}
		if err := sf.parse(); err != nil {
			t.Fatal(err)
		}
		err := sf.checkSteps(tt.steps, tt.whole)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("steps %v, whole %v: %v, want %q", tt.steps, tt.whole, err, tt.want)
		}
	}
}
