//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/server/servertest"
)

func TestAuditCommand(t *testing.T) {
	srv := servertest.Start(t, nil)
	out := t.TempDir()
	code, stdout, stderr := runCLI("audit", "--url", srv.URL("/ws"), "--rooms", "2", "--room-size", "3", "--duration", "1s",
		"--drop-every", "200ms", "--drain", "2s", "--out", out)
	if code != 0 || !strings.Contains(stdout, "verdict: every guarantee held") || !strings.Contains(stdout, "× drop") {
		t.Fatalf("audit: code %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "audit.json")); err != nil {
		t.Error(err)
	}
	rep := t.TempDir()
	if code, stdout, stderr := runCLI("report", "--out", rep, out); code != 0 || !strings.Contains(stdout, "wrote 2 charts") {
		t.Fatalf("report: code %d\n%s\n%s", code, stdout, stderr)
	}
	for _, f := range []string{"index.html", "audit_recovery.png", "audit_anomalies.svg", "audit.json"} {
		if _, err := os.Stat(filepath.Join(rep, f)); err != nil {
			t.Error(err)
		}
	}
	page, _ := os.ReadFile(filepath.Join(rep, "index.html"))
	if !strings.Contains(string(page), "no duplicates") || !strings.Contains(string(page), `id="faults"`) {
		t.Error("the report page lacks the verdict or the faults")
	}
	if code, _, stderr := runCLI("audit", "--url", srv.URL("/ws"), "--rooms", "0"); code != 2 || !strings.Contains(stderr, "at least 1") {
		t.Errorf("--rooms 0: code %d %q", code, stderr)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis-cluster"}, "--redis-cluster needs --cluster N"},
		{[]string{"--cluster", "2", "--redis-failover", "1s"}, "--redis-failover needs --redis-cluster"},
		{[]string{"--cluster", "2", "--redis-cluster", "--redis-restart", "1s"}, "use --redis-failover"},
	} {
		if code, _, stderr := runCLI(append([]string{"audit"}, tt.args...)...); code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: code %d %q, want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
