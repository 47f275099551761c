package audit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// processFault is a fault of the cluster's processes, once, at an offset
// from the start of sending.
type processFault struct {
	kind string
	at   time.Duration
}

func (a *auditor) processFaults() []processFault {
	var out []processFault
	for _, f := range []processFault{{"node SIGKILL", a.cfg.NodeKillAt}, {"node SIGTERM", a.cfg.NodeTermAt},
		{"node SIGSTOP", a.cfg.NodePauseAt}, {"node cut from Redis", a.cfg.NodeCutAt}, {"Redis restart", a.cfg.RedisRestartAt}, {"Redis failover", a.cfg.RedisFailoverAt},
		{"NATS restart", a.cfg.NATSRestartAt}, {"NATS server SIGKILL", a.cfg.NATSKillAt}} {
		if f.at > 0 {
			out = append(out, f)
		}
	}
	return out
}

// scheduleProcessFaults starts a goroutine per process fault, owned by wg.
func (a *auditor) scheduleProcessFaults(ctx context.Context, wg *sync.WaitGroup, rng *rand.Rand) {
	for _, f := range a.processFaults() {
		node := rng.IntN(a.cfg.Cluster.Nodes())
		wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(f.at):
			}
			a.processFault(ctx, f.kind, node)
		})
	}
}

// processFault injects one fault and waits until every client is back in
// its room, which is the fault's recovery time.
func (a *auditor) processFault(ctx context.Context, kind string, node int) {
	cl, down := a.cfg.Cluster, a.cfg.NodeDown
	rec := results.AuditFault{At: time.Now().UTC(), Kind: kind, Target: fmt.Sprintf("node %d", node)}
	switch kind {
	case "Redis restart", "Redis failover":
		rec.Target = "redis"
	case "NATS restart", "NATS server SIGKILL":
		rec.Target = "nats"
	}
	a.logf("audit: fault: %s on %s", kind, rec.Target)
	var err error
	switch kind {
	case "node SIGKILL", "node SIGTERM":
		sig := syscall.SIGKILL
		if kind == "node SIGTERM" {
			sig = syscall.SIGTERM
		}
		if err = cl.StopNode(node, sig); err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(down):
			}
			err = cl.StartNode(node)
		}
	case "node SIGSTOP":
		err = cl.PauseNode(ctx, node, down)
	case "node cut from Redis":
		err = cl.CutNode(ctx, node, down)
	case "Redis restart":
		rec.Target = "redis"
		err = cl.RestartRedis(ctx, down)
	case "Redis failover":
		rec.Target, err = cl.FailoverRedis(ctx, a.roomNames())
		a.logf("audit: Redis failover: %s", rec.Target)
	case "NATS restart":
		err = cl.RestartNATS(ctx, down)
	case "NATS server SIGKILL":
		rec.Target, err = cl.KillNATSServer(ctx, down)
		a.logf("audit: NATS server SIGKILL: %s", rec.Target)
	}
	if err != nil {
		a.noteError(fmt.Errorf("fault %s: %w", kind, err))
	}
	start := rec.At
	for time.Since(start) < 30*time.Second {
		if a.allConnected() {
			rec.Recovered, rec.RecoveredOK = time.Since(start), true
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	a.mu.Lock()
	a.processRecs = append(a.processRecs, rec)
	a.mu.Unlock()
}

// allConnected reports whether every client is in its room.
func (a *auditor) allConnected() bool {
	for _, c := range a.clients {
		c.mu.Lock()
		ok := c.connected
		c.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// roomNames are the audit's rooms.
func (a *auditor) roomNames() []string {
	out := make([]string, a.cfg.Rooms)
	for i := range out {
		out[i] = a.cfg.RoomPrefix + "-r" + strconv.Itoa(i)
	}
	return out
}
