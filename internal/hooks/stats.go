package hooks

import (
	"sync/atomic"
	"time"

	"github.com/scalechat/scalechat/internal/histogram"
)

// Outcome is what became of one call.
type Outcome uint8

// The outcomes, as the metrics label them.
const (
	Allowed     Outcome = iota // the backend allowed
	Refused                    // the backend refused
	Replaced                   // the backend allowed and replaced the message (publish)
	Error                      // no valid answer: refused connection, HTTP status, bad JSON
	Timeout                    // no answer within the timeout
	OpenCircuit                // not called: the circuit is open
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"allowed", "refused", "replaced", "error", "timeout", "open_circuit"}

// String is the outcome's metric label.
func (o Outcome) String() string { return outcomeNames[o] }

// Outcomes lists every outcome, in order.
func Outcomes() []Outcome {
	out := make([]Outcome, numOutcomes)
	for i := range out {
		out[i] = Outcome(i)
	}
	return out
}

// latencyBounds are the upper bounds of the latency histogram's buckets:
// 0.25 ms to 8 s, doubling, a call to a local backend in the first ones,
// a timeout in the last.
var latencyBounds = func() []time.Duration {
	var b []time.Duration
	for d := 250 * time.Microsecond; d <= 8*time.Second; d *= 2 {
		b = append(b, d)
	}
	return b
}()

// stats are a hook's counters, updated by the goroutines that call.
type stats struct {
	outcomes [numOutcomes]atomic.Uint64
	latency  *histogram.Histogram // latencyBounds
}

func newStats() stats { return stats{latency: histogram.New(latencyBounds...)} }

func (s *stats) count(o Outcome) { s.outcomes[o].Add(1) }

// observe counts the latency of a call that reached the backend (or tried).
func (s *stats) observe(d time.Duration) { s.latency.Observe(d) }

// Stats is a snapshot of one hook's counters.
type Stats struct {
	Hook     string
	Outcomes [numOutcomes]uint64 // by Outcome
	// The latency of the calls that reached the backend or tried (open
	// circuits are not): Count of them, Sum seconds, in buckets.
	histogram.Snapshot
}

// Stats returns a snapshot of every hook that is on.
func (c *Client) Stats() []Stats {
	if c == nil {
		return nil
	}
	var all []Stats
	for _, h := range c.hooks {
		if h == nil {
			continue
		}
		st := Stats{Hook: h.kind.String(), Snapshot: h.stats.latency.Snapshot()}
		for o := range st.Outcomes {
			st.Outcomes[o] = h.stats.outcomes[o].Load()
		}
		all = append(all, st)
	}
	return all
}

func nowMilli() int64 { return time.Now().UnixMilli() }
