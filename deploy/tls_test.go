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
	if testing.Short() {
		t.Skip("starts two servers, two proxies and two load generators")
	}
	testsupport.Need(t, "haproxy", "haproxy")
	testsupport.Need(t, "openssl", "openssl")
	root := repoFile(t, "")
	out := filepath.Join(t.TempDir(), "tls")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "compare", "--smoke", "--out", out, "scenarios/tls.yaml")
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
	if !strings.Contains(string(stdout), "tls  plain") {
		t.Error("no tls-over-plain ratios under the table")
	}
}
