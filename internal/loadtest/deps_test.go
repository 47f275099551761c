//go:build linux

package loadtest

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/scalechat/scalechat/"

// serverSide are the packages of the chat server: the lab drives servers
// over the network or as processes, and never links them (a lab built with
// the server would measure, and break with, the server's own code).
var serverSide = []string{
	module + "internal/server",
	module + "internal/room",
	module + "internal/broker",
	module + "internal/metrics", // the node's exposition, built on internal/server
}

// TestLabDoesNotLinkTheServer runs `go list -deps` on the lab's packages
// (their non-test code) and fails if any of them reaches a server package.
// internal/metrics, which does link the server, is listed too: it shows the
// check sees an import when there is one.
func TestLabDoesNotLinkTheServer(t *testing.T) {
	lab := []string{"loadtest", "analyze", "report", "audit", "bench", "benchpage", "results", "scrape", "diff", "capacity", "slo", "knee", "launch"}
	pkgs := []string{module + "internal/metrics"}
	for _, p := range lab {
		pkgs = append(pkgs, module+"internal/"+p)
	}
	deps := listDeps(t, pkgs)
	for _, p := range pkgs {
		if _, ok := deps[p]; !ok {
			t.Fatalf("go list gave nothing for %s", p)
		}
	}
	if !deps[module+"internal/metrics"][module+"internal/server"] {
		t.Fatal("go list -deps does not show internal/metrics importing internal/server: the check below sees nothing")
	}
	for _, p := range pkgs[1:] {
		for _, s := range serverSide {
			if deps[p][s] {
				t.Errorf("%s links %s: the lab must not link the server (find the chain with go list -deps and go list -f '{{.ImportPath}} {{.Imports}}')", p, s)
			}
		}
	}
}

// listDeps returns, for each package, the set of packages it depends on.
func listDeps(t *testing.T, pkgs []string) map[string]map[string]bool {
	t.Helper()
	args := append([]string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, pkgs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	deps := map[string]map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		set := map[string]bool{}
		for _, d := range f[1:] {
			set[d] = true
		}
		deps[f[0]] = set
	}
	return deps
}
