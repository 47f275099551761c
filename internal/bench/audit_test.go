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
	needRedisServer(t)
	exe := buildScalechat(t)
	for _, tt := range []struct {
		name   string
		faults []string
		held   bool
		want   []string
	}{
		// Issue 33: every room has an owner node the others follow; a
		// killed or stopped owner is taken over under a new epoch (its
		// members told reset), a drained one hands its rooms to a follower.
		{"node SIGKILL, SIGTERM and SIGSTOP, connections cut", []string{"--node-kill", "1s", "--node-term", "2500ms", "--node-pause", "4s", "--drop-every", "300ms"}, true,
			[]string{"1 × node SIGKILL", "1 × node SIGTERM", "1 × node SIGSTOP", "verdict: every guarantee held"}},
		// Issue 24 (docs/cluster.md, "Redis outages"): while Redis is away
		// messages to shared rooms are refused to their senders, and when it
		// is back without the rooms' streams their members resume into new
		// epochs and are told reset: nothing lost in silence, no seq naming
		// two messages.
		{"Redis restart: refusals, new epochs, every guarantee held", []string{"--redis-restart", "1500ms"}, true,
			[]string{"1 × Redis restart", "refused with an error frame", "0 sends lost", "0 seqs naming two messages", "verdict: every guarantee held"}},
		// A node cut off from Redis past its lease while its clients stay
		// connected: its rooms are taken over under a new epoch, and it
		// drops them when it is back.
		{"a node cut off from Redis past its lease", []string{"--node-cut", "1s", "--node-down", "4s"}, true,
			[]string{"1 × node cut from Redis", "verdict: every guarantee held"}},
		// The owner SIGSTOPped past its 3 s lease: the follower takes its
		// rooms over under a new epoch, and on waking the stopped node
		// drops them (1012). Out of CI until 2026-11-27: go-redis's
		// retries ordered messages twice (7138ddc), and a follower closed
		// the members before it refused what it had forwarded (8316866).
		{"node SIGSTOP past the lease", []string{"--node-pause", "1s", "--node-down", "5s"}, true,
			[]string{"1 × node SIGSTOP", "0 sends lost", "0 seqs naming two messages", "verdict: every guarantee held"}},
		// Issue 28: the nodes' webhooks go to the audit's receiver, which
		// checks them once the clients have left: a killed node's rooms
		// vacated after its lease, a new epoch after Redis lost the state.
		{"webhooks under a node SIGKILL and a Redis restart", []string{"--webhooks", "--node-kill", "1s", "--redis-restart", "3500ms"}, true,
			[]string{"webhooks: ", "2 epochs", "no transition twice in a row (per epoch):    held", "every room vacated, user offline at the end: held",
				"users online ", "message_published for every message:         "}},
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

// The audit on a Redis Cluster it starts (3 masters with a replica each)
// with the master of most rooms killed: the failover happens, the clients
// are back in their rooms, messages are refused meanwhile and none is lost
// in silence or ordered twice, every guarantee held (issue 24: 3 of 3
// seeds, docs/guarantees.md), and the exit code agrees with the verdict.
// The records between nodes go on shard channels, and the rooms' streams
// go on after the failover: no message is received again after a reset.
func TestAuditRedisClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and two nodes")
	}
	for _, tool := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing (CI installs it)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	exe := buildScalechat(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "audit", "--cluster", "2", "--redis-cluster",
		"--redis-failover", "1500ms", "--duration", "6s", "--drain", "5s").CombinedOutput()
	t.Logf("%s", out)
	want := []string{"redis cluster: 3 masters with a replica each", "1 × Redis failover", "replica promoted after",
		"held   recovery", "held   isolation", "refused with an error frame", "0 sends lost", "0 seqs naming two messages",
		"0 received again after a reset", "verdict: every guarantee held"}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if held := strings.Contains(string(out), "verdict: every guarantee held"); held != (err == nil) {
		t.Errorf("exit %v with the verdict held = %v", err, held)
	}
}
