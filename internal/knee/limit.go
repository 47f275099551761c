package knee

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
)

// Limit is the first resource that ran out in a probe.
type Limit struct {
	Kind string // generator, rate-limit, refusals, file-descriptors, network, server-cpu, connections, latency
	Text string // a sentence with its figures
}

// serverCPUFull is the share of the machine's cores from which the
// server's CPU counts as saturated (the generator's own threshold).
const serverCPUFull = 0.9

// FirstLimit names what ran out in step s, a probe that missed its
// objectives, looking in the order that keeps the server from being blamed
// for the lab: the generator, the server's refusals (rate limits first),
// file descriptors, a full network link of the generator's machine (it
// caps what the server gets, so it comes before the server's CPU), the
// server's CPU (cpuCores, from its metrics, against the cores it may use,
// serverCores; 0 when unknown), connections, and last latency with nothing
// at its limit.
func FirstLimit(s results.StepMeta, cpuCores float64, serverCores int) Limit {
	errText := strings.ToLower(s.FirstError)
	switch {
	case s.Saturated:
		return Limit{"generator", fmt.Sprintf("the load generator saturated (%s)", s.SaturationReason)}
	case s.RateLimited > 0:
		return Limit{"rate-limit", fmt.Sprintf("the server's rate limit: %d message(s) refused with rate_limited (%.2f%% of %d sent)",
			s.RateLimited, 100*float64(s.RateLimited)/float64(max(s.Sent, 1)), s.Sent)}
	case s.ServerErrors > 0:
		return Limit{"refusals", fmt.Sprintf("the server refused %d message(s) (first: %s)", s.ServerErrors, s.FirstServerError)}
	case strings.Contains(errText, "too many open files") || strings.Contains(errText, "emfile"):
		return Limit{"file-descriptors", fmt.Sprintf("file descriptors: %d client(s) failed (%s)", s.ConnectErrors+s.Disconnects, s.FirstError)}
	case s.NetworkFull != "":
		return Limit{"network", "the network: " + s.NetworkFull}
	case serverCores > 0 && cpuCores >= serverCPUFull*float64(serverCores):
		return Limit{"server-cpu", fmt.Sprintf("the server's CPU: %.2f of %d cores busy", cpuCores, serverCores)}
	case s.ConnectErrors+s.Disconnects+s.SendErrors+s.PollErrors > 0:
		return Limit{"connections", fmt.Sprintf("connections: %d failed to connect, %d dropped, %d requests failed (first error: %s)",
			s.ConnectErrors, s.Disconnects, s.SendErrors+s.PollErrors, s.FirstError)}
	}
	cpu := ""
	if cpuCores > 0 {
		cpu = fmt.Sprintf("; server CPU %.2f cores", cpuCores)
	}
	return Limit{"latency", fmt.Sprintf("latency: the objectives broke with no resource the lab measures at its limit (p99 %.3gms, delivery %.3f%%%s)",
		s.LatencyMs.P99, 100*s.DeliveryRatio, cpu)}
}

// ServerCores returns the CPU the servers of rows used between from and to
// (unix µs), in cores: the sum over nodes of the CPU seconds between their
// first and last scrape in that window, over its length. It reports false
// when no node was scraped twice in it.
func ServerCores(rows []results.ServerRow, from, to int64) (float64, bool) {
	byNode := map[string][]results.ServerRow{}
	for _, r := range rows {
		if r.UnixUS >= from && r.UnixUS <= to && !math.IsNaN(r.CPUSeconds) {
			byNode[r.Node] = append(byNode[r.Node], r)
		}
	}
	cores, ok := 0.0, false
	for _, rs := range byNode {
		sort.Slice(rs, func(i, j int) bool { return rs[i].UnixUS < rs[j].UnixUS })
		a, b := rs[0], rs[len(rs)-1]
		if b.UnixUS > a.UnixUS {
			cores += (b.CPUSeconds - a.CPUSeconds) / (float64(b.UnixUS-a.UnixUS) / 1e6)
			ok = true
		}
	}
	return cores, ok
}
