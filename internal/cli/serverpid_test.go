//go:build linux

package cli

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestServerPIDAgainstRealServer runs a knee search with --server-pid
// against a real `scalechat serve` process (rate limit 20 msg/s): every
// probe records the process's CPU from /proc in its server CSV, judges
// cpu_per_delivery on it, and the first load that missed gets the
// server's CPU in the knee file.
func TestServerPIDAgainstRealServer(t *testing.T) {
	bin, err := testsupport.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	node := testsupport.StartNode(t, bin, "serve", "--rate-limit", "20", "--rate-burst", "3")
	defer node.Kill()
	pid := node.Pid()
	dir := t.TempDir()
	out := filepath.Join(dir, "find.csv")
	code, stdout, stderr := loadtestAgainst(t, "--url", node.URL("/ws"), "--rooms", "2", "--room-size", "4",
		"--duration", "2s", "--drain", "1s", "--out", out, "--no-csv", "--server-pid", strconv.Itoa(pid),
		"--find", "rate", "--find-start", "8", "--find-factor", "4", "--find-resolution", "60%", "--find-probes", "4", "--find-warmup", "1s",
		"--slo", "delivery>=99.9%,cpu_per_delivery<1s")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	k, err := results.ReadKnee(results.KneePath(out))
	if err != nil {
		t.Fatal(err)
	}
	if k.Above <= 0 || k.LimitKind != "rate-limit" {
		t.Fatalf("knee %g, above %g, limit %s: %s\n%s", k.Knee, k.Above, k.LimitKind, k.Limit, stdout)
	}
	name := "pid:" + strconv.Itoa(pid)
	for _, p := range k.Probes {
		var cpu *results.SLOResult
		for i := range p.SLO {
			if p.SLO[i].Metric == "cpu_per_delivery" {
				cpu = &p.SLO[i]
			}
		}
		if cpu == nil || cpu.Measured == nil || *cpu.Measured <= 0 || cpu.Verdict != "met" {
			t.Errorf("probe %s: cpu_per_delivery %+v, want measured from /proc and met", p.Step, cpu)
		}
		if p.Load == k.Above && (p.ServerCPU <= 0 || p.ServerCPU > 2) {
			t.Errorf("probe %s above the knee: server CPU %g cores, want the process's", p.Step, p.ServerCPU)
		}
		meta, err := results.ReadMeta(filepath.Join(dir, p.Meta))
		if err != nil {
			t.Fatal(err)
		}
		rows, bad, err := results.ReadServer(filepath.Join(dir, meta.ServerMetrics))
		if err != nil || bad != 0 || len(rows) < 3 {
			t.Fatalf("probe %s: %d server rows, %d malformed, %v", p.Step, len(rows), bad, err)
		}
		for _, r := range rows {
			if r.Node != name || r.RSSBytes <= 0 {
				t.Errorf("probe %s: server row %+v, want one of %s", p.Step, r, name)
				break
			}
		}
		if last, first := rows[len(rows)-1], rows[0]; last.CPUSeconds <= first.CPUSeconds {
			t.Errorf("probe %s: the server's CPU did not grow under load: %g → %g s", p.Step, first.CPUSeconds, last.CPUSeconds)
		}
	}
}
