package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/audit"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/version"
)

// localCluster is what audit --cluster starts: redis-server (or a Redis
// Cluster, or NATS) and nodes of this binary on loopback, which the
// process faults act on.
type localCluster interface {
	audit.Cluster
	URLs() []string
	Engine() string
	Stop()
}

// clusterEngine is what ties the nodes of audit --cluster.
type clusterEngine int

const (
	engineRedis        clusterEngine = iota // one redis-server
	engineRedisCluster                      // --redis-cluster
	engineNATS                              // --nats: one nats-server
	engineNATSCluster                       // --nats-cluster: three
)

// auditEngine checks the engine flags of audit against each other and the
// faults, and returns the engine they choose.
func auditEngine(cfg *audit.Config, nodes int, redisCluster, natsOne, natsCluster, webhooks bool) (clusterEngine, error) {
	onNATS := natsOne || natsCluster
	switch {
	case redisCluster && nodes == 0:
		return 0, errors.New("--redis-cluster needs --cluster N")
	case natsOne && nodes == 0:
		return 0, errors.New("--nats needs --cluster N")
	case natsCluster && nodes == 0:
		return 0, errors.New("--nats-cluster needs --cluster N")
	case natsOne && natsCluster:
		return 0, errors.New("give --nats (one nats-server) or --nats-cluster (three), not both")
	case onNATS && redisCluster:
		return 0, errors.New("the nodes run on Redis or on NATS: give --redis-cluster or --nats/--nats-cluster, not both")
	case cfg.NATSRestartAt > 0 && !natsOne:
		return 0, errors.New("--nats-restart needs --nats (one nats-server); with --nats-cluster use --nats-kill-one")
	case cfg.NATSKillAt > 0 && !natsCluster:
		return 0, errors.New("--nats-kill-one needs --nats-cluster (three nats-servers); with --nats use --nats-restart")
	case cfg.RedisRestartAt > 0 && onNATS:
		return 0, errors.New("--redis-restart restarts Redis, and the nodes run on NATS: use --nats-restart (--nats) or --nats-kill-one (--nats-cluster)")
	case cfg.RedisFailoverAt > 0 && onNATS:
		return 0, errors.New("--redis-failover fails a Redis Cluster over, and the nodes run on NATS: use --nats-kill-one with --nats-cluster")
	case cfg.NodeCutAt > 0 && onNATS:
		return 0, errors.New("--node-cut cuts a node off from a single Redis, not from NATS")
	case cfg.RedisFailoverAt > 0 && !redisCluster:
		return 0, errors.New("--redis-failover needs --redis-cluster")
	case webhooks && nodes == 0:
		return 0, errors.New("--webhooks needs --cluster N")
	case cfg.NodeCutAt > 0 && redisCluster:
		return 0, errors.New("--node-cut cuts a node off from a single Redis, not from a Redis Cluster")
	case cfg.RedisRestartAt > 0 && redisCluster:
		return 0, errors.New("--redis-restart restarts a single Redis; with --redis-cluster use --redis-failover")
	}
	switch {
	case redisCluster:
		return engineRedisCluster, nil
	case natsOne:
		return engineNATS, nil
	case natsCluster:
		return engineNATSCluster, nil
	}
	return engineRedis, nil
}

func newAuditCmd() *cobra.Command {
	cfg := audit.Config{}
	var out, clusterDir string
	var hooks *webhookAudit // with --webhooks
	var nodes int
	var redisCluster, natsOne, natsCluster, webhooks bool
	sf := sloFlags{audit: true}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check delivery, not speed: loss, duplicates, order and resume under injected faults",
		Long: `audit runs chat clients against a scalechat server and checks every delivery. Every message
is known by its sender and message_id and by where the server put it (room, epoch, seq). A
message some client received (its sender's echo or another member's copy: the server accepted
it) is owed to every member of its room from the member's first joined frame on, whichever node
or seq it came under. The run counts deliveries missing (owed and neither received nor
announced by a history_gap or reset), flagged (announced), duplicated (a seq received twice,
or a message received again under another seq, resumes included), reordered (a seq below the previous one on the same connection), foreign (a
room the client is not in), messages delivered under two seqs, seqs that name two different
messages (two nodes ordering the same room apart), and sends never delivered to anyone (lost;
unconfirmed when the connection ended within a second after the write, since the protocol has
no acknowledgement).

Faults, each optional:
  --drop-every D      cut a random client's connection every D, without a close frame, as a
                      network failure would; the client reconnects after --reconnect with since
                      and epoch, and the time until it is back in its room is reported per fault
With --cluster N the audit starts redis-server and N nodes of this binary (scalechat serve
--redis) on loopback itself; client i starts on node i mod N and moves to the next node on
every reconnect. Then, once each, at the given time after sending starts, on a random node:
  --node-kill T       SIGKILL the node; it starts again --node-down later
  --node-term T       SIGTERM the node (it drains with 1001); it starts again --node-down later
  --node-pause T      SIGSTOP the node for --node-down, then SIGCONT
  --node-cut T        cut the node off from Redis for --node-down (each node reaches Redis
                      through its own loopback proxy, which closes its connections and refuses
                      new ones): the node and its clients stay up, as in a partition
  --redis-restart T   stop Redis (no persistence: its data is lost), start it --node-down later
With --redis-cluster the nodes use a Redis Cluster the audit starts (3 masters with a replica
each, real redis-server in cluster mode, created with redis-cli) instead of one redis-server:
  --redis-failover T  SIGKILL the master that serves the most of the audit's rooms, wait until
                      its replica is promoted (about 2 s: the cluster's node timeout is 1 s),
                      then start the killed one again (it rejoins as a replica). A kill, not
                      CLUSTER FAILOVER: a crash is what a deployment meets, and a manual
                      failover hands the slots over with the master's consent, losing nothing
With --nats the nodes run on NATS instead (scalechat serve --nats): one nats-server with
JetStream the audit starts (needs nats-server), its store on disk; with --nats-cluster on three
nats-servers routed as one NATS cluster, each with JetStream and a store of its own, the nodes
given the three URLs and --nats-replicas 3. --node-cut, --redis-restart and --redis-failover
need Redis; the node faults above and --webhooks work on NATS too, and:
  --nats-restart T    with --nats: stop the nats-server (SIGTERM), start it again --node-down
                      later on its port with its store: unlike Redis's, JetStream's data survives
  --nats-kill-one T   with --nats-cluster: SIGKILL the nats-server the first node is connected
                      to, start it again --node-down later with its store (it rejoins the cluster)
The recovery time of a process fault is until every client is back in its room.
  --webhooks          the nodes POST their webhooks (docs/hooks.md), message_published
                      included, to a receiver the audit runs on loopback; the clients are
                      users (?name=); after the run it checks them: every request signed,
                      no room, member or user transition twice in a row (per epoch, after
                      dropping duplicates by id), every room vacated and every user offline
                      within 15 s once the clients left, and a message_published for every
                      message the clients received (reported, not judged, after a node kill
                      or a Redis restart, which lose the events not yet in Redis)

The verdict lists each guarantee (docs/guarantees.md) as held or BROKEN; the exit code is 1
when one is broken. --slo judges the audit, as one step named audit, against objectives on
what it measures: recovery (the longest time from a fault until every client was back in
its room; a fault never recovered from misses it), delivery, loss, lost, duplicates and
reordered, e.g. --slo 'recovery<2s,delivery>=99.99%'. The verdicts are printed under the
guarantees, recorded in audit.json and, with --junit FILE, written as JUnit XML (a testcase
per objective, a failed one per broken guarantee). With --slo the exit code is 3 when an
objective is missed or a guarantee broken (measured, and the answer is no), 4 when one is
inconclusive (recovery without faults), 1 only when the audit could not run.

--out DIR writes audit.json (every figure, and every fault with what went wrong after it
until the next one); "scalechat report --out R DIR" draws it.

Clients speak docs/protocol.md with the subprotocol scalechat.v1 (joined frames, seq,
resume with since and epoch, history_gap), or with --protocol legacy the original
five-field JSON (room from the URL, chat frames only): there a message is owed to a client
connected from 200 ms before anyone first received it until a second after; one a client missed
while away is counted as "missed while away", since the protocol cannot resume; order is
checked per sender. With --protocol socketio the clients speak Socket.IO 4 to a server with the
join and chat events of docs/loadtest.md (--url ws://HOST:PORT, path /socket.io/ unless given),
checked as the five-field protocol's, each in its room from its join's acknowledgement.
An audit holds at most 5,000 clients.`,
		Example: `  scalechat audit --url ws://127.0.0.1:8080/ws
  scalechat audit --cluster 2 --node-kill 5s --redis-restart 12s --duration 20s
  scalechat audit --cluster 2 --node-kill 5s --duration 15s --slo 'recovery<3s' --junit audit.xml
  scalechat audit --cluster 2 --webhooks --node-kill 4s --redis-restart 10s --duration 15s
  scalechat audit --cluster 2 --redis-cluster --redis-failover 5s --rooms 10 --room-size 6 --duration 10s
  scalechat audit --cluster 2 --nats --node-kill 4s --nats-restart 10s --duration 15s
  scalechat audit --cluster 3 --nats-cluster --nats-kill-one 5s --duration 15s
  scalechat audit --url ws://127.0.0.1:8080/ws --rooms 20 --room-size 10 --drop-every 200ms --duration 60s --out results/audit`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg.Log = c.ErrOrStderr()
			eng, err := auditEngine(&cfg, nodes, redisCluster, natsOne, natsCluster, webhooks)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			var engineName string
			if nodes > 0 {
				if c.Flags().Changed("url") {
					return &exitError{code: exitUsage, err: errors.New("give --url or --cluster, not both")}
				}
				var flags []string
				if webhooks {
					wa, err := startWebhookAudit()
					if err != nil {
						return &exitError{code: exitFailed, err: err}
					}
					defer wa.stop()
					hooks, flags = wa, append(flags, wa.flags()...)
					cfg.Names = true // the clients are users: their online and offline are checked too
				}
				cl, err := startLocalCluster(c.Context(), eng, clusterDir, nodes, c.ErrOrStderr(), flags...)
				if err != nil {
					return &exitError{code: exitFailed, err: fmt.Errorf("start the cluster: %w", err)}
				}
				defer cl.Stop()
				cfg.URL, cfg.URLs, cfg.Cluster, engineName = "", cl.URLs(), cl, cl.Engine()
			}
			if err := cfg.Check(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := sf.parse(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := sf.checkAudit(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			res, err := audit.Run(c.Context(), cfg)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			res.Tool, res.Version, res.Args, res.Nodes, res.Engine = "scalechat audit", version.Version(), os.Args[1:], nodes, engineName
			if err := audit.WriteSummary(c.OutOrStdout(), res); err != nil {
				return err
			}
			sf.judgeAudit(res)
			if out != "" {
				if err := writeAuditJSON(out, res); err != nil {
					return fmt.Errorf("write results: %w", err)
				}
			}
			// The nodes' leases last 3 s: a killed node's rooms are
			// vacated within about 4 s of its death, sent soon after.
			lossy := cfg.NodeKillAt > 0 || cfg.NodeCutAt > 0 || cfg.RedisRestartAt > 0 || cfg.RedisFailoverAt > 0
			hooksBroken := hooks != nil && hooks.check(c.Context(), 15*time.Second, c.OutOrStdout(), res.Accepted, lossy)
			return sf.auditExit(c.OutOrStdout(), res, hooksBroken)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "ws://127.0.0.1:8080/ws", "server base URL; the room is appended as /{room}")
	f.StringVar(&cfg.Protocol, "protocol", audit.ProtocolScalechat, "scalechat; legacy: the original five-field JSON (no seq, no resume: what a client misses while away is reported, not counted as broken); socketio: Socket.IO 4 with the join and chat events of docs/loadtest.md, checked as legacy")
	f.IntVar(&cfg.Rooms, "rooms", 4, "rooms")
	f.IntVar(&cfg.RoomSize, "room-size", 5, "clients per room")
	f.DurationVar(&cfg.Interval, "msg-frequency", 100*time.Millisecond, "interval between two messages of one client")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long clients send")
	f.DurationVar(&cfg.Drain, "drain", 5*time.Second, "after sending stops, wait at most this long for what is in flight")
	f.DurationVar(&cfg.DropEvery, "drop-every", 0, "fault: cut a random client's connection this often (0: never)")
	f.DurationVar(&cfg.Reconnect, "reconnect", 50*time.Millisecond, "how long a cut client waits before it reconnects")
	f.StringVar(&cfg.RoomPrefix, "room-prefix", "", "prefix of room names (default: a random run id, so runs do not share history)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the send phases and of the faults' choice of clients")
	f.StringVar(&out, "out", "", "write audit.json into this `DIR`")
	f.IntVar(&nodes, "cluster", 0, "start redis-server and this many scalechat nodes on loopback and audit them (needs redis-server; nats-server with --nats or --nats-cluster)")
	f.StringVar(&clusterDir, "cluster-logs", "", "with --cluster: keep the processes' logs in this folder (default: a temporary one, removed)")
	f.DurationVar(&cfg.NodeKillAt, "node-kill", 0, "with --cluster: SIGKILL a node this long after sending starts (0: never)")
	f.DurationVar(&cfg.NodeTermAt, "node-term", 0, "with --cluster: SIGTERM a node this long after sending starts (0: never)")
	f.DurationVar(&cfg.NodePauseAt, "node-pause", 0, "with --cluster: SIGSTOP a node this long after sending starts (0: never)")
	f.DurationVar(&cfg.NodeCutAt, "node-cut", 0, "with --cluster: cut a node off from Redis for --node-down this long after sending starts; its clients stay connected (0: never)")
	f.DurationVar(&cfg.RedisRestartAt, "redis-restart", 0, "with --cluster: restart Redis this long after sending starts (0: never)")
	f.BoolVar(&webhooks, "webhooks", false, "with --cluster: the nodes send their webhooks (docs/hooks.md, message_published included) to a receiver the audit runs, which checks them after the run: signed, no room, member or user transition twice in a row after dropping duplicates by id, every room vacated and user offline once the clients left, a message_published for every message received")
	f.BoolVar(&redisCluster, "redis-cluster", false, "with --cluster: start a Redis Cluster of 3 masters with a replica each (redis-server in cluster mode, ports 12000-22767 and their bus ports) instead of one redis-server")
	f.DurationVar(&cfg.RedisFailoverAt, "redis-failover", 0, "with --redis-cluster: SIGKILL the master serving the most audit rooms this long after sending starts, wait for its replica's promotion, start it again as a replica (0: never)")
	f.BoolVar(&natsOne, "nats", false, "with --cluster: the nodes run on NATS (scalechat serve --nats): one nats-server with JetStream the audit starts (port 12000-22767, its store in the logs folder's nats/) instead of Redis")
	f.BoolVar(&natsCluster, "nats-cluster", false, "with --cluster: the nodes run on a NATS cluster the audit starts, three nats-servers with JetStream routed to each other (ports 12000-22767), given all three URLs and --nats-replicas 3")
	f.DurationVar(&cfg.NATSRestartAt, "nats-restart", 0, "with --nats: stop the nats-server (SIGTERM) this long after sending starts and start it again with its store --node-down later (0: never)")
	f.DurationVar(&cfg.NATSKillAt, "nats-kill-one", 0, "with --nats-cluster: SIGKILL the nats-server the first node is connected to this long after sending starts, start it again with its store --node-down later (0: never)")
	f.DurationVar(&cfg.NodeDown, "node-down", time.Second, "how long a killed or stopped node, a paused node, a node cut off from Redis, Redis or a nats-server stays down")
	sf.define(f)
	f.Lookup("slo").Usage = "objectives judged on the whole audit, comma-separated or repeated: METRIC OP VALUE over recovery (the longest fault's, until every client was back in its room), delivery, loss, lost, duplicates, reordered, e.g. recovery<2s,delivery>=99.99% (docs/guarantees.md#scalechat-audit); exit code 3 when one is missed or a guarantee broken"
	return cmd
}

func writeAuditJSON(dir string, res *results.Audit) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, results.AuditJSON), append(b, '\n'), 0o644)
}
