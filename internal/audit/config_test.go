package audit

import (
	"strings"
	"testing"
	"time"
)

// TestCheckEngineFaults: the NATS faults need a cluster, do not go with
// the Redis faults, and one NATS server's restart does not go with the
// kill of one server of three.
func TestCheckEngineFaults(t *testing.T) {
	type stub struct{ Cluster } // Check only asks whether there is one
	for _, tt := range []struct {
		cfg  Config
		want string // "" for none
	}{
		{Config{NATSRestartAt: time.Second}, "node, Redis and NATS faults need a cluster the audit starts"},
		{Config{NATSKillAt: time.Second}, "node, Redis and NATS faults need a cluster the audit starts"},
		{Config{Cluster: stub{}, NATSRestartAt: time.Second, RedisRestartAt: time.Second}, "need clusters on different engines"},
		{Config{Cluster: stub{}, NATSKillAt: time.Second, NodeCutAt: time.Second}, "need clusters on different engines"},
		{Config{Cluster: stub{}, NATSKillAt: time.Second, RedisFailoverAt: time.Second}, "need clusters on different engines"},
		{Config{Cluster: stub{}, NATSRestartAt: time.Second, NATSKillAt: time.Second}, "--nats-restart needs one NATS server and --nats-kill-one a NATS cluster of three"},
		{Config{Cluster: stub{}, NATSKillAt: -time.Second}, "fault times must not be negative"},
		{Config{Cluster: stub{}, NATSRestartAt: time.Second, NodeKillAt: time.Second}, ""},
		{Config{Cluster: stub{}, NATSKillAt: time.Second, NodePauseAt: time.Second}, ""},
	} {
		tt.cfg.URL, tt.cfg.Rooms, tt.cfg.RoomSize, tt.cfg.Interval, tt.cfg.Duration = "ws://127.0.0.1:1/ws", 1, 1, time.Second, time.Second
		err := tt.cfg.Check()
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
