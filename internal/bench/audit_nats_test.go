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

// needNATSServer skips a test without the nats-server binary, or fails it
// in CI, which installs it (internal/testsupport.StartNATSProcess's rule).
func needNATSServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nats-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nats-server is missing (CI installs it)")
		}
		t.Skip("nats-server is not installed")
	}
}

// The audit against a local cluster on NATS it starts itself (audit
// --cluster 2 --nats: one nats-server with JetStream; --nats-cluster:
// three routed, the nodes with --nats-replicas 3), through the built
// binary: the node faults act on the nodes as on Redis, and the NATS
// faults on the servers.
func TestAuditLocalNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster on NATS three times")
	}
	needNATSServer(t)
	exe := buildScalechat(t)
	// held: every guarantee must hold and the exit code be 0; without
	// it, every guarantee but no loss.
	for _, tt := range []struct {
		name  string
		args  []string
		held  bool
		want  []string
		lacks []string
	}{
		{"node SIGKILL on one nats-server", []string{"--nats", "--node-kill", "3s"}, true,
			[]string{"nats: nats-server with JetStream on port", "--nats nats://127.0.0.1:", "1 × node SIGKILL"}, nil},
		// Unlike a Redis restart (no persistence), the server comes back
		// with its JetStream store: the rooms go on in their epochs, no
		// room starts anew; meanwhile messages to shared rooms are refused.
		{"nats-server restarted with its store", []string{"--nats", "--nats-restart", "3s"}, true,
			[]string{"1 × NATS restart", "NATS restart on nats: back after", "nats-restart1: nats-server"},
			[]string{"started anew under a client"}},
		{"one server of a NATS cluster of three SIGKILLed", []string{"--nats-cluster", "--nats-kill-one", "3s"}, true,
			[]string{"nats cluster: 3 nats-servers with JetStream, routed", "--nats-replicas 3", "1 × NATS server SIGKILL",
				"(node 0's)", "-restart1: nats-server"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := append([]string{"audit", "--cluster", "2", "--duration", "8s", "--drain", "5s"}, tt.args...)
			out, err := exec.CommandContext(ctx, exe, args...).CombinedOutput()
			t.Logf("%s", out)
			want := append(tt.want, "held   no duplicates", "held   order", "held   isolation", "held   recovery", "0 seqs naming two messages")
			if tt.held {
				want = append(want, "held   no loss", "verdict: every guarantee held")
			}
			for _, w := range want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, l := range tt.lacks {
				if strings.Contains(string(out), l) {
					t.Errorf("output has %q", l)
				}
			}
			if held := strings.Contains(string(out), "verdict: every guarantee held"); held != (err == nil) {
				t.Errorf("exit %v with the verdict held = %v", err, held)
			}
		})
	}
}
