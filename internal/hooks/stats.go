package hooks

import (
	"sync/atomic"
	"time"
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
	buckets  [32]atomic.Uint64 // len(latencyBounds)+1 at most; the last used one counts larger values
	sum      atomic.Int64      // nanoseconds
}

func (s *stats) count(o Outcome) { s.outcomes[o].Add(1) }

// observe counts the latency of a call that reached the backend (or tried).
func (s *stats) observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	s.buckets[i].Add(1)
	s.sum.Add(int64(d))
}

// Stats is a snapshot of one hook's counters.
type Stats struct {
	Hook     string
	Outcomes [numOutcomes]uint64 // by Outcome
	Bounds   []float64           // the latency buckets' upper bounds, seconds
	Counts   []uint64            // calls per bucket, not cumulative; one more than Bounds, the last for larger values
	Count    uint64              // calls that reached the backend or tried (open circuits are not)
	Sum      float64             // seconds
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
		st := Stats{Hook: h.kind.String(), Bounds: make([]float64, len(latencyBounds)), Counts: make([]uint64, len(latencyBounds)+1)}
		for o := range st.Outcomes {
			st.Outcomes[o] = h.stats.outcomes[o].Load()
		}
		for i, b := range latencyBounds {
			st.Bounds[i] = b.Seconds()
		}
		for i := range st.Counts {
			n := h.stats.buckets[i].Load()
			st.Counts[i] = n
			st.Count += n
		}
		st.Sum = time.Duration(h.stats.sum.Load()).Seconds()
		all = append(all, st)
	}
	return all
}

func nowMilli() int64 { return time.Now().UnixMilli() }
