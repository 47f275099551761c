//go:build linux

package bench

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// The scaling scenario's load: rooms of R members (--scaling-room-size,
// default scalingRoom), each client sending one 256-byte message a second,
// so a client brings R deliveries a second. A server of k loops starts at
// k × scalingBase deliveries a second (k × R², one full room, when that is
// more) and doubles it each step, up to scalingSteps steps,
// until the knee: the first step that loses a message or whose p99
// passes scalingP99, or whose generator saturates (beyond it the figures
// would be the generator's).
const (
	scalingRoom  = 50
	scalingBase  = 10000
	scalingSteps = 6
	scalingP99   = 100  // ms
	scalingFiles = 1000 // open files a server keeps besides its connections (listeners, epoll, logs)
)

// loopCounts are the server sizes the scaling scenario measures: 1, 2, 4
// … up to n, and n itself.
func loopCounts(n int) []int {
	var out []int
	for k := 1; k < n; k *= 2 {
		out = append(out, k)
	}
	return append(out, n)
}

// runScaling measures a server of 1, 2, 4 … N event loops (N: the server
// CPUs), each pinned to as many CPUs, at loads proportional to its loops
// rising to the knee: deliveries/s against p50, p99 and CPU per delivery,
// the latency–throughput curve of each size, and the generator's cores.
func runScaling(ctx context.Context, r *runner) ([]Result, error) {
	counts := loopCounts(len(r.srvCPUs))
	steps, dur := scalingSteps, r.dur(8*time.Second, time.Second)
	if r.smoke {
		counts, steps = counts[:1], 1
	}
	var rows []Result
	for _, k := range counts {
		got, err := r.scaleLoops(ctx, k, steps, dur)
		rows = append(rows, got...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// scaleLoops runs the load steps against one server of k loops on the
// first k server CPUs, and adds a row for its knee.
func (r *runner) scaleLoops(ctx context.Context, k, steps int, dur time.Duration) ([]Result, error) {
	sub := *r
	sub.srvCPUs = r.srvCPUs[:k]
	room := cmp.Or(r.scalingRoom, scalingRoom)
	if r.smoke {
		room = min(room, scalingRoom)
	}
	name := fmt.Sprintf("scaling %d loop%s", k, plural(k))
	srv, err := sub.startServer(ctx, fmt.Sprintf("scaling-%d-server", k), "--loops", itoa(k))
	if err != nil {
		return nil, err
	}
	defer srv.shutdown(5 * time.Second)
	// A server holds one file per connection: a step beyond the open-file
	// limit it inherits would measure refused connections.
	maxClients := int(inspectHost().NofileSoft) - scalingFiles
	var rows []Result
	knee := Result{Scenario: name + ": knee", Ratio: -1, Target: fmt.Sprintf("100 %%, p99 < %dms", scalingP99)}
	for i := range steps {
		if ctx.Err() != nil {
			break
		}
		if err := srv.alive(); err != nil {
			return rows, err
		}
		load := k * scalingStart(room) << i
		if r.smoke {
			load = room * room // one room
		}
		clients := load / room
		if clients > maxClients {
			addNote(&knee, fmt.Sprintf("%s/s planned needs %d connections, more than the open-file limit (ulimit -n %d) allows: raise it to go on",
				rate(float64(load)), clients, maxClients+scalingFiles))
			break
		}
		g, err := r.runLoadtest(ctx, fmt.Sprintf("scaling-%d-%d", k, load), wsURL(srv), timeoutFor(clients, 5000, dur),
			"--rooms", itoa(clients/room), "--room-size", itoa(room), "--msg-frequency", "1s", "--msg-size", "256",
			"--duration", dur.String(), "--ramp", "5000", "--drain", "2s", "--source-ips", sources)
		if err != nil {
			return rows, err
		}
		row := scalingRow(fmt.Sprintf("%s, %s/s planned", name, rate(float64(load))), g, srv)
		row.Loops = k
		rows = append(rows, row)
		s := g.step()
		if !scalingMet(s) {
			addNote(&knee, fmt.Sprintf("%s/s planned: delivery %s, p99 %s", rate(float64(load)), ratio(row.Ratio), ms(row.P99)))
			break
		}
		knee.Clients, knee.PerSecond, knee.P50, knee.P99, knee.CPUPerDel = row.Clients, row.PerSecond, row.P50, row.P99, row.CPUPerDel
		knee.Figure = rate(row.PerSecond) + " deliveries/s"
		if s.Saturated {
			knee.Saturated = true
			knee.Figure = "≥ " + knee.Figure + " (lower bound)"
			break
		}
		time.Sleep(time.Second) // let the server go quiet between steps
	}
	knee.Verdict = "-"
	if knee.PerSecond > 0 {
		knee.Verdict = "measured"
	}
	return append(rows, knee), nil
}

// scalingRow is a step's traffic row, its figure the generator's cores.
func scalingRow(name string, g *genRun, srv *proc) Result {
	row := trafficRow(name, g, srv)
	if s := g.step(); !s.SendStartedAt.IsZero() {
		if w := s.SendEndedAt.Sub(s.SendStartedAt).Seconds(); w > 0 {
			row.Figure = fmt.Sprintf("generator %.2f cores", row.GenCPU/w)
		}
	}
	return row
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// scalingStart is the deliveries per second a loop starts at with rooms of
// room members: scalingBase, or one full room when that is more (a room of
// R members at 1 msg/s per client carries R² deliveries a second).
func scalingStart(room int) int { return max(scalingBase, room*room) }

// scalingMet is the knee's test of one step: everything delivered, every
// connection kept, p99 under scalingP99.
func scalingMet(s results.StepMeta) bool { return lossless(s) && s.LatencyMs.P99 < scalingP99 }
