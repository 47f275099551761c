//go:build linux

package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
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
		notes = append(notes, fmt.Sprintf("%d error frames from the server (first: %s)", s.ServerErrors, s.FirstServerError))
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
