//go:build linux

package bench

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
)

// sweepSteps are the steps a bench: sweep: generates from the file's:
// for each rooms value (the smoke: values with --smoke, when given),
// for each transport, each file step with those rooms and that
// transport. Each generated step keeps its template's bench: section.
func (sp *spec) sweepSteps(smoke bool) []loadtest.Step {
	sw := sp.bench.Sweep
	values := sw.Rooms
	if smoke && len(sw.Smoke) > 0 {
		values = sw.Smoke
	}
	transports := sw.Transport
	if len(transports) == 0 {
		transports = []string{""}
	}
	var out []loadtest.Step
	for _, n := range values {
		for _, t := range transports {
			for _, st := range sp.sc.Steps {
				sb := sp.stepBench[st.Name]
				sb.Transport = cmp.Or(t, sb.Transport)
				st.Name = sweepName(st.Name, t, n)
				st.Rooms = n
				sp.stepBench[st.Name] = sb
				out = append(out, st)
			}
		}
	}
	if k := sp.bench.SmokeSteps; smoke && k > 0 && k < len(out) {
		out = out[:k]
	}
	return out
}

// sweepName names a generated step: its template's name, its transport
// (when the sweep has them) and its rooms.
func sweepName(step, transport string, rooms int) string {
	if transport == "" {
		return fmt.Sprintf("%s-%d", step, rooms)
	}
	return fmt.Sprintf("%s-%s-%d", step, transport, rooms)
}

// checkRoundTrip refuses a sweep, a transport or a round_trip: that
// cannot run: polling transports need their wait or interval, and only
// round_trip: steps speak them (a step of traffic measures delivery
// over WebSocket); round trips run against one server whose metrics
// count its bytes.
func (sp *spec) checkRoundTrip() error {
	b := &sp.bench
	var transports []string
	if sw := b.Sweep; sw != nil {
		if len(sw.Rooms) == 0 {
			return errors.New("sweep: rooms: no values")
		}
		if slices.ContainsFunc(append(slices.Clone(sw.Rooms), sw.Smoke...), func(n int) bool { return n < 1 }) {
			return errors.New("sweep: rooms: every value must be at least 1")
		}
		for _, t := range sw.Transport {
			if !slices.Contains(results.TransportNames, t) {
				return fmt.Errorf("sweep: transport %q (want %s)", t, strings.Join(results.TransportNames, ", "))
			}
		}
		transports = sw.Transport
	}
	for _, sb := range sp.stepBench {
		if sb.Transport != "" {
			transports = append(transports, sb.Transport)
		}
	}
	polls := slices.ContainsFunc(transports, func(t string) bool { return t != results.WebSocket })
	switch {
	case b.RoundTrip < 0:
		return errors.New("round_trip: must be positive")
	case polls && b.RoundTrip == 0:
		return errors.New("transport: long-polling and polling need round_trip: (only round trips are measured over HTTP)")
	case slices.Contains(transports, results.LongPolling) && (b.PollWait <= 0 || b.PollWait.D() > 60*time.Second):
		return errors.New("poll_wait: want between 0 and 60s (the server's maximum) for long-polling")
	case slices.Contains(transports, results.Polling) && b.PollInterval <= 0:
		return errors.New("poll_interval: want a positive interval for polling")
	case b.Comparison != "" && (b.RoundTrip == 0 || b.Comparison != filepath.Base(b.Comparison) || b.Comparison == ".."):
		return fmt.Errorf("comparison: %q (want a folder name, with round_trip:)", b.Comparison)
	case b.RoundTrip > 0 && (b.Servers.clustered() || len(b.Setups) > 0 || b.Loops != "" || b.Until != "" || b.Knee != nil || len(b.Figures) > 0):
		return errors.New("round_trip: runs its steps against one server each (no nodes, redis, setups, loops, until, knee or figures)")
	case b.RoundTrip > 0 && slices.Contains(b.Servers.Flags, "--metrics-addr"):
		return errors.New("round_trip: reads the server's bytes from its metrics: no --metrics-addr of its own")
	}
	return nil
}
