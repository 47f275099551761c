package capacity

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Write prints the plan: the answer first, then the workload's figures,
// the model and its assumptions, and where each cost came from.
func Write(out io.Writer, p Plan) error {
	w, n, c := p.Workload, p.Node, p.Costs
	b := &strings.Builder{}
	fmt.Fprintf(b, "scalechat plan: %s users, %s rooms each, rooms of %s, %s messages/s per user (%s), %s messages\n",
		count(w.Users), count(w.RoomsPerUser), count(w.RoomSize), num(w.Rate), perMinute(w.Rate), bytes(w.MsgSize))
	fmt.Fprintf(b, "nodes of %s cores, %s, %s open files; %s CPU headroom\n\n",
		num(n.Cores), bytes(n.Memory), count(n.Files), pct(n.Headroom))
	fmt.Fprintf(b, "ANSWER: %d node%s (%s", p.Nodes, plural(p.Nodes), p.Limit)
	if p.Nodes > 1 {
		fmt.Fprintf(b, "; CPU alone needs %d, memory %d, open files %d", p.NodesByCPU, p.NodesByMem, p.ByFile)
	}
	fmt.Fprintf(b, ")")
	if p.Nodes > 1 {
		fmt.Fprintf(b, " and %d Redis shard%s", p.RedisShards, plural(p.RedisShards))
		if c.NATS {
			fmt.Fprintf(b, " (or, on NATS, %d nats-server core%s)", p.NATSCores, plural(p.NATSCores))
		}
	} else {
		fmt.Fprintf(b, ", no Redis")
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	N := float64(p.Nodes)
	fmt.Fprintf(tw, "\tper node\ttotal\n")
	fmt.Fprintf(tw, "connections\t%s\t%s\n", count(p.ConnsPerNode), count(p.Connections))
	fmt.Fprintf(tw, "rooms loaded\t%s\t%s rooms\n", count(p.RoomsPerNode), count(p.Rooms))
	fmt.Fprintf(tw, "messages in /s\t%s\t%s\n", count(p.Messages/N), count(p.Messages))
	fmt.Fprintf(tw, "deliveries /s\t%s\t%s\n", count(p.Deliveries/N), count(p.Deliveries))
	fmt.Fprintf(tw, "CPU\t%s of %s cores (%s busy)\t%s cores\n", num(p.CPUPerNode), num(n.Cores), pct(p.CPUPerNode/n.Cores), num(p.CPUPerNode*N))
	if p.Nodes > 1 {
		fmt.Fprintf(tw, "  of which the cluster\t%s cores\t%s cores\n", num(p.ClusterPerNode), num(p.ClusterPerNode*N))
	}
	fmt.Fprintf(tw, "memory (RSS)\t%s of %s\t%s\n", bytes(p.MemPerNode), bytes(n.Memory), bytes(p.MemPerNode*N))
	fmt.Fprintf(tw, "  of which history\t%s\t%s\n", bytes(p.HistoryPerNode), bytes(p.HistoryPerNode*N))
	fmt.Fprintf(tw, "open files\t%s of %s\t%s\n", count(p.FilesPerNode), count(n.Files), count(p.FilesPerNode*N))
	fmt.Fprintf(tw, "bandwidth in\t%s\t%s\n", rate(p.InPerNode), rate(p.InPerNode*N))
	fmt.Fprintf(tw, "bandwidth out\t%s\t%s\n", rate(p.OutPerNode), rate(p.OutPerNode*N))
	if p.Nodes > 1 {
		fmt.Fprintf(tw, "Redis\t\t%s cores over %d shard%s, %s of streams\n", num(p.RedisCPU), p.RedisShards, plural(p.RedisShards), bytes(p.RedisMemory))
		if c.NATS {
			fmt.Fprintf(tw, "or NATS, instead of Redis\t\t%s cores of nats-server: %d at the headroom\n", num(p.NATSCPU), p.NATSCores)
		}
	}
	fmt.Fprintf(tw, "all clients of a node reconnect in\t≥ %s\t(at the node's spare CPU)\n", secs(p.ReconnectSeconds))
	tw.Flush()
	for _, warn := range p.Warnings {
		fmt.Fprintf(b, "WARNING: %s\n", warn)
	}
	fmt.Fprintf(b, `
MODEL
  connections  = users (one WebSocket each, in all its rooms)
  rooms        = users × rooms per user ÷ room size
  messages/s   = users × rate;  deliveries/s = messages/s × room size (the sender's echo included)
  node CPU     = messages/s × (m + s·d(f) + w·(1 − u)) per core busy a share u, s = room size:
                 m = %.2f µs per message, w = %.1f µs to wake an idle loop, d(f) per delivery to a
                 connection receiving f frames/s: %.2f µs up to 10 (a writev each), %.2f µs from 200
                 (frames share writevs), log-linear between; here f = rate × room size = %s, d = %.2f µs
  cluster      = per message, all nodes together: %.0f µs (room spanning nodes) or %.0f µs (room on one
                 node); Redis %.0f µs or %.0f µs per message, one core per shard, same headroom%s
  memory       = %s + connections × %s + rooms loaded × history (%s messages) × (%s + %d B) × %d (Go GC)
  bandwidth    = in: messages × %s (%s + WebSocket header + mask); out: deliveries × %s (+ room, seq,
                 server_at + header); TCP/IP headers (≈ 52 B a packet) not included
  open files   = connections + %d; a node needs ulimit -n (systemd LimitNOFILE) above that
  reconnect    = connections per node × %.0f µs (upgrade, join, one message, close) ÷ spare cores

ASSUMPTIONS
  - Rooms spanning nodes: %s.
    The load balancer hashes a connection's first room (docs/cluster.md), so a user in one room keeps
    every room on one node; rooms joined later have members on any node. Override with --spanning.
  - Cluster costs were measured with rooms of 4 at 1 msg/s, where nothing batches: an upper bound. Rooms
    of 50 at 2,000 msg/s measured no extra node CPU (docs/benchmarks.md, issue 14).
  - Costs scale linearly with cores (one event loop per core); they were measured on one core.
  - CPU headroom %s: room for a deploy's reconnect storm, a lost node's users and bursts. History is
    full (every room has sent --history messages). Memory is filled to %s at most.
  - Rates above serve's --rate-limit (%d/s) are refused; kernel socket buffers are outside RSS.

COSTS (unit figures, and where they came from)
`, c.PerMessage, c.WakeUp, c.PerDelivery, c.PerBatched, num(w.Rate*w.RoomSize), c.Delivery(w.Rate*w.RoomSize), c.SplitNode, c.OwnedNode, c.SplitRedis, c.OwnedRedis, natsModel(c),
		bytes(baseRSS), bytes(c.IdleBytes), num(w.History), bytes(p.OutFrame), historyEntry, gcFactor,
		bytes(p.ClientFrame), bytes(w.MsgSize), bytes(p.OutFrame), filesReserve, c.ConnectUS,
		spanning(w.Spanning, p.Spanning), pct(n.Headroom), pct(memoryShare), rateLimit)
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, f := range c.Figures {
		fmt.Fprintf(tw, "  %s\t%s %s\t%s\n", f.Key, num(f.Value), f.Unit, f.Source)
	}
	tw.Flush()
	_, err := io.WriteString(out, b.String())
	return err
}

// natsModel is the model's line of a cluster on NATS, when the costs
// have it.
func natsModel(c Costs) string {
	if !c.NATS {
		return ""
	}
	return fmt.Sprintf(`
  NATS         = instead of Redis: nats-server %.0f µs or %.0f µs per message, its cores at the same
                 headroom; the nodes' own cluster cost above is the one measured on Redis`, c.SplitNATS, c.OwnedNATS)
}

func spanning(asked, used float64) string {
	if asked >= 0 {
		return pct(used) + " (--spanning)"
	}
	return pct(used) + " (default: all rooms, when users are in several rooms on several nodes)"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// count prints a count with thousands separators, rounded up.
func count(v float64) string {
	if v < 10 && v != math.Trunc(v) {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	s := strconv.FormatFloat(math.Ceil(v), 'f', 0, 64)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return count(v)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 0, 64) + " %" }

func perMinute(v float64) string {
	if v >= 1 {
		return num(v) + "/s"
	}
	return num(v*60) + "/min"
}

func bytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(v, 'f', 0, 64) + " B"
	}
	return num(v) + " " + units[i]
}

// rate prints bytes per second as MB/s and Mbit/s.
func rate(v float64) string {
	return fmt.Sprintf("%s MB/s (%s Mbit/s)", num(v/1e6), num(v*8/1e6))
}

func secs(v float64) string {
	if math.IsInf(v, 1) {
		return "never (no spare CPU)"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " s"
}
