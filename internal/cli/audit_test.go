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

// TestAuditEngineFlags: the flags that put audit --cluster on NATS, and
// the faults of each engine, are refused in one line, exit 2, before
// anything starts, when they do not go together.
func TestAuditEngineFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats"}, "--nats needs --cluster N"},
		{[]string{"--nats-cluster"}, "--nats-cluster needs --cluster N"},
		{[]string{"--cluster", "2", "--nats", "--nats-cluster"}, "give --nats (one nats-server) or --nats-cluster (three), not both"},
		{[]string{"--cluster", "2", "--nats", "--redis-cluster"}, "give --redis-cluster or --nats/--nats-cluster, not both"},
		{[]string{"--cluster", "2", "--nats-cluster", "--redis-cluster"}, "give --redis-cluster or --nats/--nats-cluster, not both"},
		{[]string{"--cluster", "2", "--nats-restart", "1s"}, "--nats-restart needs --nats (one nats-server)"},
		{[]string{"--cluster", "2", "--nats-cluster", "--nats-restart", "1s"}, "with --nats-cluster use --nats-kill-one"},
		{[]string{"--cluster", "2", "--nats-kill-one", "1s"}, "--nats-kill-one needs --nats-cluster"},
		{[]string{"--cluster", "2", "--nats", "--nats-kill-one", "1s"}, "with --nats use --nats-restart"},
		{[]string{"--cluster", "2", "--redis-cluster", "--nats-kill-one", "1s"}, "--nats-kill-one needs --nats-cluster"},
		{[]string{"--cluster", "2", "--nats", "--redis-restart", "1s"}, "--redis-restart restarts Redis, and the nodes run on NATS"},
		{[]string{"--cluster", "2", "--nats-cluster", "--redis-restart", "1s"}, "--redis-restart restarts Redis, and the nodes run on NATS"},
		{[]string{"--cluster", "2", "--nats", "--redis-failover", "1s"}, "--redis-failover fails a Redis Cluster over, and the nodes run on NATS"},
		{[]string{"--cluster", "2", "--nats-cluster", "--redis-failover", "1s"}, "--redis-failover fails a Redis Cluster over, and the nodes run on NATS"},
		{[]string{"--cluster", "2", "--nats", "--node-cut", "1s"}, "--node-cut cuts a node off from a single Redis, not from NATS"},
		{[]string{"--nats-restart", "1s"}, "--nats-restart needs --nats"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(append([]string{"audit"}, tt.args...)...)
			if code != 2 || strings.Count(stderr, "\n") > 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("code %d %q, want 2 and one line with %q", code, stderr, tt.want)
			}
		})
	}
}
