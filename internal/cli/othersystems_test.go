package cli

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestWhatBuildsOnOtherSystems pins which packages say they need Linux (no
// Go file left on macOS) and which build there: the server and the load
// tester are built on epoll; the binary, its clients, analyze, report and
// audit are not. scripts/test.sh compiles the module for macOS
// (GOOS=darwin go vet ./...), which this cannot do quickly.
func TestWhatBuildsOnOtherSystems(t *testing.T) {
	const m = "github.com/scalechat/scalechat/"
	linuxOnly := []string{"internal/server", "internal/server/servertest", "internal/netpoll", "internal/metrics",
		"internal/loadtest", "internal/bench"}
	anywhere := []string{"cmd/scalechat", "client", "internal/cli", "internal/terminal", "internal/analyze",
		"internal/report", "internal/audit", "internal/results", "internal/scrape", "internal/protocol", "internal/ws",
		"internal/room", "internal/broker", "internal/testsupport"}
	var pkgs []string
	for _, p := range append(append([]string{}, linuxOnly...), anywhere...) {
		pkgs = append(pkgs, m+p)
	}
	cmd := exec.Command("go", append([]string{"list", "-e", "-f", "{{.ImportPath}} {{len .GoFiles}}"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64")
	out, err := cmd.Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	files := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) == 2 {
			files[strings.TrimPrefix(f[0], m)] = f[1]
		}
	}
	for _, p := range linuxOnly {
		if n, ok := files[p]; !ok || n != "0" {
			t.Errorf("%s: %q Go files on macOS, want none (//go:build linux on every file)", p, n)
		}
	}
	for _, p := range anywhere {
		if n, ok := files[p]; !ok || n == "0" {
			t.Errorf("%s has no Go file on macOS: it must build there", p)
		}
	}
}
