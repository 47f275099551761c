package deploy_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// scenarios/tls.yaml at smoke size: the plain and the TLS target each start
// behind scripts/tls-front.sh's HAProxy, every message is delivered once
// through it, and the server's figures are read from scalechat's pid.
func TestTLSCompareSmoke(t *testing.T) {
	tlsCompareSmoke(t, repoFile(t, ""), "scenarios/tls.yaml", "tls  plain")
}

// scenarios/tls-bun.yaml at smoke size: Bun's server.js serves wss:// with
// the same script and proxy.
func TestBunTLSCompareSmoke(t *testing.T) {
	tlsCompareSmoke(t, needBun(t), "scenarios/tls-bun.yaml", "bun-tls  bun-plain")
}

// tlsCompareSmoke runs a scenario of two targets (plain and TLS) through
// scripts/tls-front.sh at smoke size, from root, and checks every row and
// that the second target's ratios over the first (ratios) are printed.
func tlsCompareSmoke(t *testing.T, root, scenario, ratios string) {
	if testing.Short() {
		t.Skip("starts two servers, two proxies and two load generators")
	}
	testsupport.Need(t, "haproxy", "haproxy")
	testsupport.Need(t, "openssl", "openssl")
	out := filepath.Join(t.TempDir(), "tls")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "compare", "--smoke", "--out", out, scenario)
	cmd.Dir = root
	stdout, err := cmd.CombinedOutput()
	t.Logf("%s", stdout)
	if err != nil {
		t.Fatalf("bench compare: %v", err)
	}
	res, err := results.ReadTargets(filepath.Join(out, results.TargetsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 6 {
		t.Fatalf("%d rows, want 2 targets × 3 steps", len(res.Rows))
	}
	for _, r := range res.Rows {
		if r.Joined != r.Clients || r.Unexpected != 0 || r.Errors != 0 || r.RSS == 0 || r.Failure() != "" {
			t.Errorf("row %+v", r)
		}
		if r.Sent > 0 && (r.Ratio != 1 || r.Received != r.Expected) {
			t.Errorf("%s %s: delivered %d of %d", r.Target, r.Step, r.Received, r.Expected)
		}
	}
	if !strings.Contains(string(stdout), ratios) {
		t.Errorf("no %q ratios under the table", ratios)
	}
}
