package capacity

import (
	"fmt"
	"math"
)

// Workload is what the users do.
type Workload struct {
	Users        float64 // connected at once, one connection each
	RoomsPerUser float64 // rooms each connection is in
	RoomSize     float64 // members of a room
	Rate         float64 // messages a user sends per second (over all its rooms)
	MsgSize      float64 // bytes of the chat JSON object a client sends
	History      float64 // messages kept per room (scalechat serve --history)
	// Spanning is the share of rooms with members on several nodes; < 0:
	// the default (see Plan).
	Spanning float64
}

// Node is one machine running scalechat serve.
type Node struct {
	Cores    float64 // cores for its event loops (GOMAXPROCS)
	Memory   float64 // bytes
	Files    float64 // open files one process may have (ulimit -n)
	Headroom float64 // share of CPU kept free, e.g. 0.5
}

// Limits of the server and the model.
const (
	maxRoomsPerConn = 100  // scalechat serve --max-rooms-per-connection's default
	rateLimit       = 20   // scalechat serve --rate-limit's default, messages per second per connection
	memoryShare     = 0.8  // share of a node's memory the plan fills at most
	filesReserve    = 1000 // open files kept for listeners, epoll, Redis, logs
	baseRSS         = 20 << 20
	serverAdds      = 60 // bytes the server adds to a chat object: room, seq, server_at
	historyEntry    = 64 // bytes of bookkeeping per message in a history ring
	gcFactor        = 2  // Go's heap grows to twice the live data (GOGC=100)
	maxNodes        = 100000
)

// Plan is the answer: how many nodes and what each carries.
type Plan struct {
	Workload Workload
	Node     Node
	Costs    Costs

	Connections, Rooms    float64
	Messages, Deliveries  float64 // per second, whole system
	ClientFrame, OutFrame float64 // bytes on the wire of a message in and of a delivery out, WebSocket header included

	Nodes                          int
	Limit                          string // what set the node count
	NodesByCPU, NodesByMem, ByFile int

	Spanning              float64 // share of rooms with members on several nodes
	CPUPerNode            float64 // cores, cluster extra included
	ClusterPerNode        float64 // cores of it that the cluster adds
	RedisCPU              float64 // cores, all shards
	RedisShards           int
	RedisMemory           float64 // bytes, all shards: the rooms' streams
	NATSCPU               float64 // on NATS instead of Redis (when the costs have NATS's): nats-server's cores
	NATSCores             int     // the cores that carry NATSCPU at the headroom
	ConnsPerNode          float64
	RoomsPerNode          float64
	MemPerNode            float64 // bytes
	HistoryPerNode        float64 // bytes of it in history rings
	FilesPerNode          float64
	InPerNode, OutPerNode float64 // bytes per second
	ReconnectSeconds      float64 // a node's clients reconnecting at its spare CPU
	Warnings              []string
}

// Validate checks a workload; the error is one sentence for the user.
func (w Workload) Validate() error {
	switch {
	case w.Users < 1:
		return fmt.Errorf("users must be at least 1, not %g", w.Users)
	case w.RoomSize < 1:
		return fmt.Errorf("room size must be at least 1, not %g", w.RoomSize)
	case w.RoomsPerUser < 1:
		return fmt.Errorf("rooms per user must be at least 1, not %g", w.RoomsPerUser)
	case w.RoomSize > w.Users:
		return fmt.Errorf("rooms of %g members need at least that many users, not %g", w.RoomSize, w.Users)
	case w.Rate <= 0:
		return fmt.Errorf("rate must be more than zero")
	case w.MsgSize < 2:
		return fmt.Errorf("message size must be at least 2 bytes (a JSON object), not %g", w.MsgSize)
	case w.History < 0:
		return fmt.Errorf("history must not be negative, not %g", w.History)
	case w.Spanning > 1:
		return fmt.Errorf("the share of rooms spanning nodes must be at most 100%%")
	}
	return nil
}

// Validate checks a node; the error is one sentence for the user.
func (n Node) Validate() error {
	switch {
	case n.Cores <= 0:
		return fmt.Errorf("cores per node must be more than zero, not %g", n.Cores)
	case n.Memory < 64<<20:
		return fmt.Errorf("memory per node must be at least 64MiB")
	case n.Files <= filesReserve:
		return fmt.Errorf("the open-file limit must be more than %d, not %g", filesReserve, n.Files)
	case n.Headroom < 0 || n.Headroom >= 1:
		return fmt.Errorf("headroom must lie between 0%% and 99%%")
	}
	return nil
}

// Make plans the smallest cluster that carries w on nodes like n at the
// costs c: the smallest node count whose CPU per node stays within the
// headroom, whose memory fits and whose connections fit the open-file
// limit.
func Make(w Workload, n Node, c Costs) (Plan, error) {
	if err := w.Validate(); err != nil {
		return Plan{}, err
	}
	if err := n.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Workload: w, Node: n, Costs: c}
	p.Connections = w.Users
	p.Rooms = w.Users * w.RoomsPerUser / w.RoomSize
	p.Messages = w.Users * w.Rate
	p.Deliveries = p.Messages * w.RoomSize // the sender gets its own message too
	p.ClientFrame = w.MsgSize + wsHeader(w.MsgSize) + 4
	out := w.MsgSize + serverAdds
	p.OutFrame = out + wsHeader(out)
	p.warn()
	cpuOK, memOK, fileOK := 0, 0, 0
	for nodes := 1; nodes <= maxNodes; nodes++ {
		p.at(nodes)
		if cpuOK == 0 && p.CPUPerNode <= n.Cores*(1-n.Headroom) {
			cpuOK = nodes
		}
		if memOK == 0 && p.MemPerNode <= n.Memory*memoryShare {
			memOK = nodes
		}
		if fileOK == 0 && p.FilesPerNode <= n.Files {
			fileOK = nodes
		}
		if cpuOK > 0 && memOK > 0 && fileOK > 0 {
			p.NodesByCPU, p.NodesByMem, p.ByFile = cpuOK, memOK, fileOK
			p.Limit = limit(nodes, cpuOK, memOK, fileOK)
			if nodes == 1 {
				p.Warnings = append(p.Warnings, "one node leaves no spare: with a second (and Redis) its users survive a deploy or a failure of the first")
			}
			return p, nil
		}
	}
	return Plan{}, fmt.Errorf("this workload needs more than %d nodes of this size: plan with bigger nodes", maxNodes)
}

// at fills the per-node figures for a cluster of nodes.
func (p *Plan) at(nodes int) {
	w, n, c := p.Workload, p.Node, p.Costs
	N := float64(nodes)
	p.Nodes = nodes
	p.Spanning = w.Spanning
	if p.Spanning < 0 {
		// The balancer hashes the URL's room: a connection's first room
		// has all its members on one node. Rooms joined later by frame
		// have members wherever their own first rooms sent them.
		p.Spanning = 0
		if nodes > 1 && w.RoomsPerUser > 1 && w.RoomSize > 1 {
			p.Spanning = 1
		}
	}
	if nodes == 1 {
		p.Spanning = 0
	}
	f := p.Spanning
	msgs := p.Messages / N
	// Each connection receives rate × room size frames a second.
	p.CPUPerNode = c.NodeCPU(msgs, w.RoomSize, w.Rate*w.RoomSize, n.Cores)
	p.ClusterPerNode, p.RedisCPU, p.RedisShards, p.RedisMemory = 0, 0, 0, 0
	p.NATSCPU, p.NATSCores = 0, 0
	if nodes > 1 && c.NATS {
		p.NATSCPU = p.Messages * (f*c.SplitNATS + (1-f)*c.OwnedNATS) / 1e6
		p.NATSCores = max(1, int(math.Ceil(p.NATSCPU/(1-n.Headroom))))
	}
	if nodes > 1 {
		p.ClusterPerNode = msgs * (f*c.SplitNode + (1-f)*c.OwnedNode) / 1e6
		p.RedisCPU = p.Messages * (f*c.SplitRedis + (1-f)*c.OwnedRedis) / 1e6
		p.RedisShards = max(1, int(math.Ceil(p.RedisCPU/(1-n.Headroom))))
		p.RedisMemory = p.Rooms * w.History * (p.OutFrame + historyEntry)
	}
	p.CPUPerNode += p.ClusterPerNode
	p.ConnsPerNode = p.Connections / N
	// A spanning room is loaded on every node with members: members
	// placed at random land on N·(1 − (1 − 1/N)^size) distinct nodes.
	p.RoomsPerNode = p.Rooms * (f*N*(1-math.Pow(1-1/N, w.RoomSize)) + (1 - f)) / N
	p.HistoryPerNode = p.RoomsPerNode * w.History * (p.OutFrame + historyEntry) * gcFactor
	p.MemPerNode = baseRSS + p.ConnsPerNode*c.IdleBytes + p.HistoryPerNode
	p.FilesPerNode = p.ConnsPerNode + filesReserve
	p.InPerNode = msgs * p.ClientFrame
	p.OutPerNode = p.Deliveries / N * p.OutFrame
	spare := n.Cores - p.CPUPerNode
	if spare > 0 {
		p.ReconnectSeconds = p.ConnsPerNode * c.ConnectUS / 1e6 / spare
	} else {
		p.ReconnectSeconds = math.Inf(1)
	}
}

func limit(nodes, cpu, mem, files int) string {
	switch {
	case nodes == 1:
		return "one node carries it"
	case nodes == cpu:
		return "CPU"
	case nodes == mem:
		return "memory"
	}
	return "open files"
}

// warn notes what the server's default limits refuse.
func (p *Plan) warn() {
	w := p.Workload
	if w.RoomsPerUser > maxRoomsPerConn {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%g rooms per user is above serve's --max-rooms-per-connection (%d): raise it", w.RoomsPerUser, maxRoomsPerConn))
	}
	if w.History > 0 && w.Users*w.RoomsPerUser/w.RoomSize > 1e5 {
		p.Warnings = append(p.Warnings, "with many rooms the history rings can set the memory: lower --history or cap it with serve's --max-history-bytes, then plan with --history to match")
	}
	if w.Rate > rateLimit {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%.3g messages/s per user is above serve's --rate-limit (%d/s): raise it, or the excess is refused", w.Rate, rateLimit))
	}
}

// wsHeader is the length of a WebSocket frame header (RFC 6455 5.2) for a
// payload of n bytes, without the client's 4-byte mask.
func wsHeader(n float64) float64 {
	switch {
	case n <= 125:
		return 2
	case n <= 65535:
		return 4
	}
	return 10
}
