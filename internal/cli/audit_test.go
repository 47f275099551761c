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
	if code, _, stderr := runCLI("audit", "--url", srv.URL("/ws"), "--rooms", "0"); code != 2 || !strings.Contains(stderr, "at least 1") {
		t.Errorf("--rooms 0: code %d %q", code, stderr)
	}
}
