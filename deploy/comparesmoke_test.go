package deploy_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// compareSmoke runs `scalechat bench compare --smoke` of a scenario of two
// targets and three steps from root, checks that every row joined every
// client and delivered every message once, with the server's figures
// read, and returns what the command printed.
func compareSmoke(t *testing.T, root, scenario string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "compare")
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
	return string(stdout)
}
