//go:build linux

package loadtest

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
)

// stepPlan says, deterministically from the configuration alone, which
// client of a step is in which rooms and which process runs it, so that
// every worker and shard of a run computes the same plan without talking.
//
// Clients of a step are numbered 0..Clients-1 (the index); their client id,
// unique in the run, is the step's id offset plus the index. A client's
// messages carry the wire message_id clientID<<32 | counter (counter from 1),
// so any recipient knows the sender.
type stepPlan struct {
	index    int // position of the step in the scenario
	step     Step
	clients  int
	idOffset uint64
	cum      []int    // cum[r] = first client index of room r (primary rooms), len rooms+1
	roomPre  string   // room names are roomPre + decimal room index
	names    []string // names[r] is the name of room r, made once for the CSV rows
	echo     bool
	seed     uint64
	part     int
	parts    int
	shard    int
	workers  int
}

func newStepPlan(cfg *Config, index int, idOffset uint64) *stepPlan {
	s := cfg.Steps[index]
	p := &stepPlan{
		index:    index,
		step:     s,
		clients:  s.Clients(),
		idOffset: idOffset,
		roomPre:  cfg.RoomPrefix + "-s" + strconv.Itoa(index+1) + "-r",
		echo:     cfg.Protocol == ProtocolEcho,
		seed:     cfg.Seed,
		part:     cfg.Part(),
		parts:    cfg.Parts(),
		shard:    cfg.Shard,
		workers:  cfg.Workers,
	}
	p.names = make([]string, p.rooms())
	for r := range p.names {
		p.names[r] = p.roomPre + strconv.Itoa(r)
	}
	if p.echo {
		// Every echo client is alone in its own "room": it expects its own
		// messages back and nobody else's.
		p.cum = nil
		return p
	}
	counts := roomCounts(s.Rooms, p.clients, s.RoomSkew)
	p.cum = make([]int, len(counts)+1)
	for r, n := range counts {
		p.cum[r+1] = p.cum[r] + n
	}
	return p
}

// rooms is the number of distinct rooms of the step.
func (p *stepPlan) rooms() int {
	if p.echo {
		return p.clients
	}
	return p.step.Rooms
}

// roomCounts spreads clients over rooms: evenly for skew 0, else with
// weights 1/(r+1)^skew (Zipf), largest remainders first, so the counts sum
// to clients exactly.
func roomCounts(rooms, clients int, skew float64) []int {
	counts := make([]int, rooms)
	if skew == 0 {
		for r := range counts {
			counts[r] = clients / rooms
		}
		for r := 0; r < clients%rooms; r++ {
			counts[r]++
		}
		return counts
	}
	w := make([]float64, rooms)
	var sum float64
	for r := range w {
		w[r] = 1 / math.Pow(float64(r+1), skew)
		sum += w[r]
	}
	type rem struct {
		r int
		f float64
	}
	rems := make([]rem, rooms)
	left := clients
	for r := range w {
		x := float64(clients) * w[r] / sum
		counts[r] = int(x)
		left -= counts[r]
		rems[r] = rem{r, x - float64(counts[r])}
	}
	sort.SliceStable(rems, func(i, j int) bool { return rems[i].f > rems[j].f })
	for i := 0; left > 0; i = (i + 1) % rooms {
		counts[rems[i].r]++
		left--
	}
	return counts
}

// inShard reports whether the client with run-wide id runs in this
// process's shard: deliveries of its messages count in this process's
// summary (a shard cannot know what other shards sent).
func (p *stepPlan) inShard(id uint64) bool {
	if id < p.idOffset || id >= p.idOffset+uint64(p.clients) {
		return false
	}
	c := int(id - p.idOffset)
	return (c%p.parts)/p.workers == p.shard
}

// inStep reports whether id is the run-wide id of a client of this step.
func (p *stepPlan) inStep(id uint64) bool {
	return id >= p.idOffset && id < p.idOffset+uint64(p.clients)
}

// id returns the run-wide client id of client index c.
func (p *stepPlan) id(c int) uint64 { return p.idOffset + uint64(c) }

// primaryRoom is the room in the URL of client c.
func (p *stepPlan) primaryRoom(c int) int {
	if p.echo {
		return c
	}
	// First r with cum[r+1] > c.
	return sort.SearchInts(p.cum[1:], c+1)
}

// clientRooms appends the rooms of client c to dst: its primary room first,
// then RoomsPerClient-1 distinct further rooms chosen at random.
func (p *stepPlan) clientRooms(c int, dst []int32) []int32 {
	first := p.primaryRoom(c)
	dst = append(dst, int32(first))
	k := p.step.RoomsPerClient
	if p.echo || k <= 1 {
		return dst
	}
	rng := rand.New(rand.NewPCG(p.seed, uint64(p.index)<<40|uint64(c)))
	start := len(dst) - 1
	for len(dst)-start < k {
		r := int32(rng.IntN(p.step.Rooms))
		dup := false
		for _, x := range dst[start:] {
			if x == r {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, r)
		}
	}
	return dst
}

// sends reports whether client c sends messages: all do unless the step
// sets Senders, which are then spread evenly over the clients (the same in
// every process of the run).
func (p *stepPlan) sends(c int) bool {
	n := int64(p.step.Senders)
	if n <= 0 || n >= int64(p.clients) {
		return true
	}
	x := int64(c)
	return (x+1)*n/int64(p.clients) > x*n/int64(p.clients)
}

// roomName returns the name of room r.
func (p *stepPlan) roomName(r int) string { return p.names[r] }

// roomIndex parses a room name of this step, or returns -1.
func (p *stepPlan) roomIndex(name []byte) int {
	if len(name) <= len(p.roomPre) || string(name[:len(p.roomPre)]) != p.roomPre {
		return -1
	}
	r := 0
	for _, ch := range name[len(p.roomPre):] {
		if ch < '0' || ch > '9' || r > 1<<31/10 {
			return -1
		}
		r = r*10 + int(ch-'0')
	}
	if r >= p.rooms() {
		return -1
	}
	return r
}

// localClients returns the indexes of the clients this process runs.
func (p *stepPlan) localClients() []int {
	out := make([]int, 0, localCount(p.clients, p.part, p.parts))
	for c := p.part; c < p.clients; c += p.parts {
		out = append(out, c)
	}
	return out
}

// localCount returns how many of a step's clients part (of parts) runs:
// those whose index is part modulo parts.
func localCount(clients, part, parts int) int {
	if part >= clients {
		return 0
	}
	return (clients - part + parts - 1) / parts
}
