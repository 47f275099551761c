//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// sources spreads the generator's connections over 4 loopback addresses,
// each with its own ephemeral port range.
const sources = "127.0.0.1-127.0.0.4"

func wsURL(p *proc) string { return "ws://" + p.addr + "/ws" }

func itoa(n int) string { return strconv.Itoa(n) }

// timeoutFor bounds a generator: its planned time plus a margin for
// connecting, draining and closing.
func timeoutFor(clients int, ramp float64, d time.Duration) time.Duration {
	return d + time.Duration(float64(clients)/ramp*float64(time.Second)) + 45*time.Second
}

// lossless reports whether a step delivered everything it expected and
// kept every connection.
func lossless(s results.StepMeta) bool {
	return s.Expected > 0 && s.Lost == 0 && s.ConnectErrors == 0 && s.Disconnects == 0 && s.Joined == int64(s.LocalClients)
}

// trafficRow fills a row from a generator run and the server processes
// that carried it, over the step's sending window.
func trafficRow(name string, g *genRun, servers ...*proc) Result {
	s := g.step()
	row := Result{Scenario: name, Clients: s.Clients, Ratio: -1, P50: s.LatencyMs.P50, P99: s.LatencyMs.P99, Max: s.LatencyMs.Max,
		GenCPU: g.windowCPU().Seconds(), Saturated: s.Saturated, deliveries: s.ReceivedAll}
	if s.Expected > 0 {
		row.Ratio = s.DeliveryRatio
	}
	if d := s.Duration.D().Seconds(); d > 0 && s.MsgFrequency > 0 {
		row.PerSecond = float64(s.ReceivedAll) / d
	}
	var cpu time.Duration
	for _, p := range servers {
		if !s.SendStartedAt.IsZero() {
			cpu += p.cpuBetween(s.SendStartedAt, s.SendEndedAt)
			row.RSS += p.maxRSS(s.SendStartedAt, s.SendEndedAt)
		}
	}
	row.ServerCPU = cpu.Seconds()
	row.CPUPerDel, row.CPUNote = perDelivery(cpu, s.ReceivedAll)
	var notes []string
	if n := s.ConnectErrors + s.Disconnects; n > 0 {
		notes = append(notes, fmt.Sprintf("%d connection errors (first: %s)", n, s.FirstError))
	}
	if s.Saturated {
		notes = append(notes, "generator saturated: "+s.SaturationReason)
	}
	if s.ServerErrors > 0 {
		notes = append(notes, fmt.Sprintf("%d error frames from the server", s.ServerErrors))
	}
	row.Note = strings.Join(notes, "; ")
	return row
}

func addNote(row *Result, note string) {
	if row.Note != "" {
		row.Note += "; "
	}
	row.Note += note
}

// roomsArgs is the rooms scenario's traffic (scenarios/rooms.yaml): rooms × 4 clients, 1 msg/s each.
func roomsArgs(rooms int, d time.Duration, extra ...string) []string {
	return append([]string{"--rooms", itoa(rooms), "--room-size", "4", "--msg-frequency", "1s", "--msg-size", "256",
		"--duration", d.String(), "--ramp", "5000", "--drain", "3s", "--source-ips", sources}, extra...)
}

// --- overhead ----------------------------------------------------------------
//
// Still Go: it runs two servers side by side with their own generators and
// scrapes one's metrics, which the file format does not say yet.

func runOverhead(ctx context.Context, r *runner) ([]Result, error) {
	rooms := r.size(1000, 10)
	dur := r.dur(10*time.Second, time.Second)
	timeout := timeoutFor(4*rooms, 5000, dur)
	var rows []Result

	// CSV recording (the generator's cost): on, off, on, off, same server.
	srv, err := r.startServer(ctx, "overhead-csv-server")
	if err != nil {
		return nil, err
	}
	perMsg := map[bool][]float64{}
	for i, on := range []bool{true, false, true, false} {
		name := fmt.Sprintf("overhead-csv-%s-%d", onOff(on), i/2+1)
		extra := []string{}
		if !on {
			extra = append(extra, "--no-csv")
		}
		g, err := r.runLoadtest(ctx, name, wsURL(srv), timeout, roomsArgs(rooms, dur, extra...)...)
		if err != nil {
			_ = srv.shutdown(5 * time.Second)
			return rows, err
		}
		row := trafficRow("overhead: CSV "+onOff(on), g, srv)
		s := g.step()
		if s.ReceivedAll > 0 {
			// Each received message is one Received row; sends add one row each.
			v := g.windowCPU().Seconds() * 1e6 / float64(s.ReceivedAll+s.Sent)
			perMsg[on] = append(perMsg[on], v)
			row.Figure = fmt.Sprintf("gen %.2f µs/msg", v)
		}
		rows = append(rows, row)
	}
	_ = srv.shutdown(5 * time.Second)
	rows = append(rows, overheadRow("overhead: CSV recording", mean(perMsg[true]), mean(perMsg[false]), "µs/msg", "generator",
		"generator CPU per message (sent + received) over the sending window, mean of 2 runs each"))

	// Metrics (the server's cost): needs a server with --metrics-addr.
	if !r.serverHasFlag("--metrics-addr") {
		rows = append(rows, Result{Scenario: "overhead: metrics", Ratio: -1, Verdict: "n/a",
			Note: "this server has no --metrics-addr yet (branch metrics): once merged, `scalechat bench overhead` measures it with no change"})
		return rows, nil
	}
	// Side by side: a server with metrics and one without run at the same
	// time on the same core, each with its own generator, so that both see
	// the same neighbours at the same moment (runs one after the other swing
	// by several percent on a shared machine). Two pairs.
	cpuPer := map[bool][]float64{}
	for pair := 1; pair <= 2; pair++ {
		var pairRows [2]Result
		var pairErrs [2]error
		var wg sync.WaitGroup
		for i, on := range []bool{false, true} {
			wg.Go(func() {
				pairRows[i], pairErrs[i] = r.metricsRun(ctx, fmt.Sprintf("overhead-metrics-%s-%d", onOff(on), pair), on, rooms, dur, timeout)
			})
		}
		wg.Wait()
		if err := errors.Join(pairErrs[:]...); err != nil {
			return rows, err
		}
		for i, on := range []bool{false, true} {
			cpuPer[on] = append(cpuPer[on], pairRows[i].CPUPerDel)
			rows = append(rows, pairRows[i])
		}
	}
	return append(rows, overheadRow("overhead: metrics", mean(cpuPer[true]), mean(cpuPer[false]), "µs/deliv", "server",
		"server CPU per delivery with the metrics listener on (scraped once a second) vs off, side by side, mean of 2 pairs")), nil
}

// overheadRow compares the CPU (of who: the server or the generator) per
// unit with a feature on and off. It is always a row: "n/a", saying why,
// when a side measured no CPU (runs shorter than the clock's 10 ms ticks).
func overheadRow(scenario string, on, off float64, unit, who, note string) Result {
	if on <= 0 || off <= 0 {
		return Result{Scenario: scenario, Ratio: -1, Figure: "–", Verdict: "n/a",
			Note: fmt.Sprintf("a run's %s CPU held fewer than %d clock ticks of 10 ms (too few to read to 10 %%, as at smoke sizes): nothing to compare", who, results.MinCPUTicks)}
	}
	return Result{Scenario: scenario, Ratio: -1, Note: note,
		Figure: fmt.Sprintf("%+.2f %s (%+.0f%%) %s CPU", on-off, unit, 100*(on-off)/off, who)}
}

func (r *runner) metricsRun(ctx context.Context, name string, on bool, rooms int, dur, timeout time.Duration) (Result, error) {
	flags := []string{"--metrics-addr", ""}
	maddr := ""
	if on {
		port, err := freePort()
		if err != nil {
			return Result{}, err
		}
		maddr = "127.0.0.1:" + itoa(port)
		flags = []string{"--metrics-addr", maddr}
	}
	srv, err := r.startServer(ctx, name+"-server", flags...)
	if err != nil {
		return Result{}, err
	}
	defer srv.shutdown(5 * time.Second)
	scrapes, failures := 0, 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if on {
		// Scrape once a second, as loadtest --server-metrics does.
		wg.Go(func() {
			client := &http.Client{Timeout: time.Second}
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					resp, err := client.Get("http://" + maddr + "/metrics")
					scrapes++
					if err != nil {
						failures++
						continue
					}
					if resp.StatusCode != http.StatusOK {
						failures++
					}
					resp.Body.Close()
				}
			}
		})
	}
	g, err := r.runLoadtest(ctx, name, wsURL(srv), timeout, roomsArgs(rooms, dur, "--no-csv")...)
	close(stop)
	wg.Wait()
	if err != nil {
		return Result{}, err
	}
	row := trafficRow("overhead: metrics "+onOff(on), g, srv)
	row.Figure = perDelFigure(row)
	if on {
		addNote(&row, fmt.Sprintf("%d scrapes of /metrics, %d failed", scrapes, failures))
	}
	return row, nil
}

// serverHasFlag reports whether `scalechat serve --help` lists flag.
func (r *runner) serverHasFlag(flag string) bool {
	out, err := exec.Command(r.exe, "serve", "--help").Output()
	return err == nil && strings.Contains(string(out), flag+" ")
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
