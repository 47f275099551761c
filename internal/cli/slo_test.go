//go:build linux

package cli

import (
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// loadtestAgainst runs `scalechat loadtest` with args and returns its exit
// code, stdout and stderr.
func loadtestAgainst(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr testsupport.SyncBuffer
	code := run(context.Background(), append([]string{"loadtest"}, args...), strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// junitCases reads a JUnit file back: testcase name -> failure message ("" for a pass).
func junitCases(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name `xml:"testsuites"`
		Suites  []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	out := map[string]string{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			out[c.Name] = ""
			if c.Failure != nil {
				out[c.Name] = "FAILED: " + c.Failure.Message
			}
		}
	}
	return out
}

// sloCase is a gate run against a real server: its objectives, the exit
// code they give and the JUnit testcases they write.
type sloCase struct {
	name     string
	slo      string
	code     int
	verdicts map[string]string // testcase -> wanted prefix of its failure ("" = passed)
}

// checkJUnit checks that the JUnit file at path holds exactly the wanted
// testcases with their verdicts.
func checkJUnit(t *testing.T, path string, verdicts map[string]string) {
	t.Helper()
	got := junitCases(t, path)
	if len(got) != len(verdicts) {
		t.Errorf("%s: testcases %v, want %v", path, got, verdicts)
	}
	for name, want := range verdicts {
		if v, ok := got[name]; !ok || !strings.HasPrefix(v, want) || (want == "" && v != "") {
			t.Errorf("%s: testcase %q: %q, want %q", path, name, v, want)
		}
	}
}

// TestSLOAgainstRealServer runs loadtest --slo against a real `scalechat
// serve`: an objective no server meets fails with exit code 3 and a JUnit
// failure naming it; objectives a healthy loopback run meets pass, on its
// step and on the whole run.
func TestSLOAgainstRealServer(t *testing.T) {
	url := serveReady(t)
	tests := []sloCase{
		{"must fail", "p99<0.001ms,delivery>=99%", exitMissed, map[string]string{
			"s1: p99<0.001ms": "FAILED: p99 = ", "s1: delivery>=99%": ""}},
		{"must pass", "p99<5s,delivery>=99.9%,connect_errors==0,run:p99.9<5s", 0, map[string]string{
			"s1: p99<5s": "", "s1: delivery>=99.9%": "", "s1: connect_errors==0": "", "run: p99.9<5s": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			junit := filepath.Join(dir, "slo.xml")
			var code int
			var stdout, stderr string
			// A generator starved by a loaded machine makes the step
			// inconclusive, honestly: a run that must pass is tried again
			// then (a miss, exit 3, is never retried).
			for try := 1; try <= 3; try++ {
				code, stdout, stderr = loadtestAgainst(t, "--url", url, "--rooms", "2", "--room-size", "3",
					"--msg-frequency", "100ms", "--duration", "1s", "--drain", "2s", "--out", filepath.Join(dir, "run.csv"),
					"--slo", tt.slo, "--junit", junit)
				if code != exitInconclusive || tt.code != 0 {
					break
				}
				t.Logf("try %d inconclusive (the generator saturated?):\n%s", try, stdout)
			}
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			checkJUnit(t, junit, tt.verdicts)
			meta, err := results.ReadMeta(filepath.Join(dir, "run.meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(meta.SLO) != len(tt.verdicts) || meta.SLO[0].Measured == nil || meta.SLO[0].Value == "–" {
				t.Errorf("meta.json slo: %+v", meta.SLO)
			}
			if !strings.Contains(stdout, "SLO s1 "+meta.SLO[0].SLO+": ") || !strings.Contains(stdout, "SLO verdict: ") {
				t.Errorf("the summary does not show the SLOs:\n%s", stdout)
			}
			if tt.code == exitMissed && !strings.Contains(stderr, "SLO missed") {
				t.Errorf("stderr does not say the SLO was missed:\n%s", stderr)
			}
			// analyze judges the same run's CSV alike, into summary.json.
			var aout, aerr testsupport.SyncBuffer
			sum := filepath.Join(dir, "analysis")
			code = run(context.Background(), []string{"analyze", "--out", sum, "--slo", tt.slo, "--junit", filepath.Join(dir, "analyze.xml"),
				filepath.Join(dir, "run.csv")}, strings.NewReader(""), &aout, &aerr)
			if code != tt.code {
				t.Fatalf("analyze exit %d, want %d\n%s\n%s", code, tt.code, aout.String(), aerr.String())
			}
			s, err := results.ReadSummary(filepath.Join(sum, results.SummaryJSON))
			if err != nil {
				t.Fatal(err)
			}
			if len(s.SLO) != len(tt.verdicts) || s.SLO[0].Measured == nil {
				t.Errorf("summary.json slo: %+v", s.SLO)
			}
			checkJUnit(t, filepath.Join(dir, "analyze.xml"), tt.verdicts)
		})
	}
}

// TestSLOCouldNotRun: a run that connected nobody is exit 1, not an SLO
// verdict.
func TestSLOCouldNotRun(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := loadtestAgainst(t, "--url", "ws://"+testsupport.FreeAddr(t)+"/ws", "--rooms", "1", "--room-size", "2",
		"--duration", "1s", "--connect-timeout", "2s", "--out", filepath.Join(dir, "run.csv"), "--slo", "p99<1s")
	if code != exitFailed || !strings.Contains(stderr, "could not run: no client of step s1 connected") {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, stdout, stderr)
	}
}

func TestSLOFlagsRefused(t *testing.T) {
	tests := []struct{ args, want string }{
		{"--slo p99<50", "the time 50 needs a unit"},
		{"--slo s9:p99<50ms", `names step "s9", which is not in the run`},
		{"--junit x.xml", "--junit needs --slo"},
		{"--slo p99<1s --slo-inconclusive maybe", "--slo-inconclusive must be fail or pass"},
		{"--slo recovery<2s", "SLO recovery<2s: only scalechat audit measures recovery"},
		{"--find rate", "--find needs --slo"},
		{"--find speed --slo p99<1s", "--find must be rate, clients or room-size"},
		{"--find rate --slo p99<1s --find-resolution x", "--find-resolution"},
		{"--find rate --slo p99<1s --msg-frequency 0", "--find rate needs clients that send"},
		{"--find rate --slo p99<1s --find-warmup -1s", "--find-warmup must not be negative"},
		{"--server-pid 1073741824", "--server-pid 1073741824 is not a process of this machine"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			code, _, stderr := loadtestAgainst(t, append(strings.Fields(tt.args), "--dry-run")...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stderr %q, want %d and %q in one line", code, stderr, exitUsage, tt.want)
			}
		})
	}
}

// TestFindKneeOfRateLimit searches the knee of messages per client against a
// real `scalechat serve --rate-limit 20`: the knee is near 20 msg/s and the
// first limit is the rate limit.
func TestFindKneeOfRateLimit(t *testing.T) {
	url := serveReady(t, "--rate-limit", "20", "--rate-burst", "3")
	dir := t.TempDir()
	out := filepath.Join(dir, "find.csv")
	code, stdout, stderr := loadtestAgainst(t, "--url", url, "--rooms", "1", "--room-size", "2",
		"--duration", "2s", "--drain", "1s", "--pause", "0s", "--out", out, "--no-csv",
		"--find", "rate", "--find-start", "8", "--find-resolution", "10%", "--find-probes", "8",
		"--slo", "delivery>=99.9%", "--junit", filepath.Join(dir, "find.xml"))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	k, err := results.ReadKnee(results.KneePath(out))
	if err != nil {
		t.Fatal(err)
	}
	if k.Stop != "found" || k.Knee < 16 || k.Knee > 22 || k.Above <= k.Knee || k.Above > 24 {
		t.Errorf("knee %g (above %g, stop %s), want about 20 msg/s\n%s", k.Knee, k.Above, k.Stop, stdout)
	}
	if k.LimitKind != "rate-limit" || !strings.Contains(k.Limit, "rate_limited") {
		t.Errorf("first limit %s: %s, want the rate limit", k.LimitKind, k.Limit)
	}
	// The first load meets the SLO (its probe run once more when a busy
	// machine stalled the generator).
	first := k.Probes[0]
	if len(k.Probes) > 1 && first.Verdict == "inconclusive" && first.Saturated != "" {
		first = k.Probes[1]
	}
	if len(k.Probes) < 4 || k.Probes[0].Load != 8 || first.Load != 8 || first.Verdict != "met" {
		t.Errorf("probes: %+v", k.Probes)
	}
	for _, p := range k.Probes {
		meta, err := results.ReadMeta(filepath.Join(dir, p.Meta))
		if err != nil {
			t.Errorf("probe %s: %v", p.Step, err)
			continue
		}
		// Every probe is a warm-up step (the default --find-warmup, 2 s),
		// recorded like any step, then the measured step: only that one is
		// judged.
		if len(meta.Steps) != 2 || meta.Steps[0].Name != p.Step+"-warmup" || meta.Steps[1].Name != p.Step ||
			meta.Steps[0].Sent == 0 || meta.Steps[0].Duration.D() != 2*time.Second {
			t.Errorf("probe %s: steps %+v, want its warm-up of 2s that sent, then itself", p.Step, meta.Steps)
		}
		for _, f := range p.Failures {
			if strings.Contains(f, "warmup") {
				t.Errorf("probe %s: judged on its warm-up: %s", p.Step, f)
			}
		}
		for _, r := range p.SLO {
			if r.Step != p.Step {
				t.Errorf("probe %s: SLO judged on step %s", p.Step, r.Step)
			}
		}
		if len(p.SLO) != 1 || len(meta.SLO) != 1 {
			t.Errorf("probe %s: SLO results %+v (meta.json: %+v), want one, of the measured step", p.Step, p.SLO, meta.SLO)
		}
		if p.Load > 24 && (p.Verdict != "missed" || p.Refused == 0) {
			t.Errorf("probe %s at %g msg/s: %s with %d refusals", p.Step, p.Load, p.Verdict, p.Refused)
		}
	}
	if !strings.Contains(stdout, "knee: ") || !strings.Contains(stdout, "first limit at") || !strings.Contains(stdout, "rate limit") {
		t.Errorf("stdout does not give the knee and its limit:\n%s", stdout)
	}
	if len(junitCases(t, filepath.Join(dir, "find.xml"))) < len(k.Probes) {
		t.Errorf("JUnit file lacks probes")
	}
	_ = io.Discard
}
