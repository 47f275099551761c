//go:build linux

package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
)

// A benchmark with bench: loops: each measures servers of 1, 2, 4 … N
// event loops (N: the server CPUs), each pinned to its first k CPUs, at
// loads proportional to k; one with vary: room_size takes its rooms'
// members from the command line (--scaling-room-size). scenarios/scaling.yaml
// is both.

// openFiles are the files a process keeps besides its connections
// (listeners, epoll, logs): a step's connections must fit the open-file
// limit less these.
const openFiles = 1000

// loopCounts are the server sizes of a loops: each benchmark: 1, 2, 4 …
// up to n, and n itself.
func loopCounts(n int) []int {
	var out []int
	for k := 1; k < n; k *= 2 {
		out = append(out, k)
	}
	return append(out, n)
}

// runSpec runs a benchmark file: once, or once per server size (loops:
// each; one loop with --smoke).
func (r *runner) runSpec(ctx context.Context, sp *spec) ([]Result, error) {
	steps := sp.steps(r.smoke)
	if sp.bench.Vary == "room_size" && r.roomSize > 0 && !r.smoke {
		steps = resizeRooms(steps, r.roomSize)
	}
	if sp.bench.Loops != "each" {
		return r.runSpecSteps(ctx, sp, steps)
	}
	counts := loopCounts(len(r.srvCPUs))
	if r.smoke {
		counts = counts[:1]
	}
	var rows []Result
	for _, k := range counts {
		sub := *r
		sub.srvCPUs = r.srvCPUs[:k]
		got, err := sub.runSpecSteps(ctx, sp.withLoops(k), scaleRooms(steps, k))
		rows = append(rows, got...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// withLoops is the file as it runs on servers of k loops: every setup's
// servers started with --loops k, its rows marked with k and its
// templates given {loops} and {n_loops}.
func (sp *spec) withLoops(k int) *spec {
	v := *sp
	v.loops = k
	v.tag = fmt.Sprintf("%s-%d", sp.sc.Name, k)
	addLoops := func(s specServers) specServers {
		s.Flags = append(slices.Clone(s.Flags), "--loops", itoa(k))
		return s
	}
	v.bench.Servers = addLoops(sp.bench.Servers)
	v.bench.Setups = map[string]specServers{}
	for name, s := range sp.bench.Setups {
		v.bench.Setups[name] = addLoops(s)
	}
	return &v
}

// vars are the placeholders a loops: each run adds to the templates.
func (sp *spec) vars() map[string]string {
	if sp.loops == 0 {
		return nil
	}
	n := fmt.Sprintf("%d loop", sp.loops)
	if sp.loops > 1 {
		n += "s"
	}
	return map[string]string{"loops": itoa(sp.loops), "n_loops": n}
}

// expandVars fills a template's {loops} and {n_loops}.
func (sp *spec) expandVars(tmpl string) string {
	var pairs []string
	for k, v := range sp.vars() {
		pairs = append(pairs, "{"+k+"}", v)
	}
	return strings.NewReplacer(pairs...).Replace(tmpl)
}

// fileTag names the file's logs and results in the work folder.
func (sp *spec) fileTag() string {
	if sp.tag != "" {
		return sp.tag
	}
	return sp.sc.Name
}

// scaleRooms multiplies every step's rooms (or clients) by k.
func scaleRooms(steps []loadtest.Step, k int) []loadtest.Step {
	out := slices.Clone(steps)
	for i := range out {
		out[i].Rooms *= k
		out[i].NumClients *= k
		out[i].Senders *= k
	}
	return out
}

// resizeRooms gives every step rooms of size members, keeping the first
// step's deliveries a second (a room of R members, every client sending,
// carries R² deliveries a message period), at least one room, and each
// step's rooms in the same proportion to the first's.
func resizeRooms(steps []loadtest.Step, size int) []loadtest.Step {
	out := slices.Clone(steps)
	if len(out) == 0 || size <= 0 {
		return out
	}
	first := out[0]
	rooms := max(1, first.Rooms*first.RoomSize*first.RoomSize/(size*size))
	for i := range out {
		out[i].Rooms = rooms * steps[i].Rooms / first.Rooms
		out[i].RoomSize = size
	}
	return out
}

// planned is the deliveries a second a step plans, for clients in one room
// each: its senders' messages a second, each delivered to its room's
// members (the sender included).
func planned(st loadtest.Step) float64 {
	period := st.MsgFrequency.D()
	if period <= 0 {
		return 0
	}
	senders := st.Clients()
	if st.Senders > 0 {
		senders = st.Senders
	}
	return float64(senders) * float64(st.RoomSize) / (float64(period) / float64(time.Second))
}
