//go:build linux

package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestDirectFloorPatch keeps scripts/direct-floor.patch, the experiment
// behind the floor figures of docs/benchmarks-log.md ("Issue 24: the floor"),
// true to the tree: it applies to a copy of the repository's files,
// builds, and its two nodes carry every message of rooms split between
// them (a load test that loses one, or connects nobody, exits non-zero).
func TestDirectFloorPatch(t *testing.T) {
	git := testsupport.Need(t, "git", "git")
	root, err := testsupport.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	files, err := exec.Command(git, "-C", root, "ls-files", "-z", "--cached").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		embedded := strings.HasPrefix(f, "internal/") || strings.HasPrefix(f, "benchmarks/") || strings.HasPrefix(f, "scenarios/")
		if !strings.HasSuffix(f, ".go") && f != "go.mod" && f != "go.sum" && !embedded {
			continue // the build needs the Go files and what they embed, under internal/, benchmarks/ and scenarios/
		}
		copyFile(t, filepath.Join(root, f), filepath.Join(src, f))
	}
	run := func(dir string, name string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	// Outside a repository, git apply patches the files as patch(1) would.
	run(src, git, "apply", filepath.Join(root, "scripts", "direct-floor.patch"))
	floor := filepath.Join(t.TempDir(), "scalechat-floor")
	run(src, "go", "build", "-o", floor, "./cmd/scalechat")

	peer := testsupport.FreeAddr(t)
	a := testsupport.StartNodeEnv(t, floor, "sequencer", testsupport.FreeAddr(t), []string{"SCALECHAT_DIRECT_FLOOR=seq:" + peer})
	b := testsupport.StartNodeEnv(t, floor, "other", testsupport.FreeAddr(t), []string{"SCALECHAT_DIRECT_FLOOR=dial:" + peer})
	out := t.TempDir()
	gens := make([]*exec.Cmd, 2)
	for i, n := range []*testsupport.Node{a, b} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		gens[i] = exec.CommandContext(ctx, floor, "loadtest", "--url", n.URL("/ws"), "--out", filepath.Join(out, n.Name+".csv"),
			"--rooms", "10", "--room-size", "4", "--shard", []string{"0/2", "1/2"}[i], "--room-prefix", "floor",
			"--msg-frequency", "200ms", "--duration", "3s", "--drain", "1s")
		if err := gens[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, g := range gens {
		if err := g.Wait(); err != nil {
			t.Errorf("the load test against node %d failed: it lost messages, or could not run: %v", i, err)
		}
	}
}

// copyFile copies src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
