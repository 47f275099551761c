//go:build linux

package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// TestBenchPage: the page of a folder of results files, written beside
// them, links each file relative to itself; without --results it is the
// page of the committed results, docs/benchmarks.md's.
func TestBenchPage(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "res")
	if err := os.Mkdir(res, 0o755); err != nil {
		t.Fatal(err)
	}
	f := results.BenchFile{Version: "test", Date: "2026-11-26", Command: "scalechat bench idle", Rows: []results.BenchRow{{Scenario: "idle", Ratio: -1, Figure: "1.00 KiB/conn"}}}
	if err := results.WriteBenchFile(filepath.Join(res, "mine.json"), f); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "docs", "page.md")
	if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"bench", "page", "--results", res, "--out", out}, nil, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "[../res/mine.json](../res/mine.json)") || !strings.Contains(string(page), "| idle | 1.00 KiB/conn |") {
		t.Errorf("the page:\n%s", page)
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"bench", "page"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "[benchmarks/results/2026-11-21-bench-ae7b174.json]") {
		t.Errorf("the page of the committed results lacks their run of 2026-11-21:\n%.2000s", stdout.String())
	}
}

// TestCommandLine: a results file records the command as given, flags
// set and arguments, so that it can be run again.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"idle"}, "scalechat bench idle"},
		{[]string{"--smoke", "--json", "x.json", "--repeat", "3", "rooms", "cluster"}, "scalechat bench --json x.json --repeat 3 --smoke rooms cluster"},
	} {
		root := newRootCmd(nil, io.Discard, io.Discard)
		cmd, rest, err := root.Find(append([]string{"bench"}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatal(err)
		}
		if got := commandLine(cmd, cmd.Flags().Args()); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
}
