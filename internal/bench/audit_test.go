//go:build linux

package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The audit against a local cluster it starts itself (two nodes and
// Redis), with the faults of docs/guarantees.md, through the built binary.
func TestAuditLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster three times")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is missing (CI installs it)")
		}
		t.Skip("redis-server is not installed")
	}
	exe := buildScalechat(t)
	for _, tt := range []struct {
		name   string
		faults []string
		held   bool
		want   []string
	}{
		{"node SIGKILL, SIGTERM and SIGSTOP, connections cut", []string{"--node-kill", "1s", "--node-term", "2500ms", "--node-pause", "4s", "--drop-every", "300ms"}, true,
			[]string{"1 × node SIGKILL", "1 × node SIGTERM", "1 × node SIGSTOP", "verdict: every guarantee held"}},
		// Known and documented (docs/guarantees.md): while Redis is away,
		// members of a room on different nodes do not hear each other.
		{"Redis restart loses cross-node deliveries", []string{"--redis-restart", "1500ms"}, false,
			[]string{"1 × Redis restart", "BROKEN no loss", "held   no duplicates", "held   order"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := append([]string{"audit", "--cluster", "2", "--duration", "6s", "--drain", "5s"}, tt.faults...)
			out, err := exec.CommandContext(ctx, exe, args...).CombinedOutput()
			t.Logf("%s", out)
			if held := err == nil; held != tt.held {
				t.Fatalf("exit: %v, want the guarantees held = %v", err, tt.held)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q", w)
				}
			}
		})
	}
}
