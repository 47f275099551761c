package results

// SLOVerdict is what a step's figure says about a service level objective:
// "met", "missed" or "inconclusive" (internal/slo judges them).
type SLOVerdict string

// SLOResult is one objective judged on one step, as meta.json (loadtest)
// and summary.json (analyze) record it under "slo".
type SLOResult struct {
	SLO      string     `json:"slo"`      // as written, e.g. "p99<50ms" or "s2:delivery>=99.9%"
	Step     string     `json:"step"`     // the step it was judged on
	Metric   string     `json:"metric"`   // e.g. "p99"
	Measured *float64   `json:"measured"` // in the metric's unit (ms, fraction, count); null when not measured
	Value    string     `json:"value"`    // Measured for people, e.g. "3.1ms", "99.95%"
	Verdict  SLOVerdict `json:"verdict"`
	Reason   string     `json:"reason"` // one sentence, e.g. "p99 = 63.2ms, not < 50ms"
}
