package slo

import (
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// RunStep names the whole run in an objective: run:p99<50ms is judged
// once, on the deliveries of every step pooled, where p99<50ms is judged
// on each step. The two differ: ten steps of 1 connect error each meet
// connect_errors<5 one by one, and the run (10) does not.
const RunStep = "run"

// applies reports whether objective o is judged on step s.
func applies(o Objective, s Step) bool {
	if s.Whole {
		return o.Step == RunStep
	}
	return o.Step == "" || o.Step == s.Name
}

// Pool returns a run's steps as one, named RunStep: counts summed, the
// first step's start to the last one's end, the first saturated step's
// reason. Latency and connect percentiles do not add up: the caller sets
// them from every delivery of the run (LatencyMs, ConnectMs).
func Pool(steps []results.StepMeta) results.StepMeta {
	w := results.StepMeta{Name: RunStep}
	for i, s := range steps {
		if i == 0 || s.StartedAt.Before(w.StartedAt) {
			w.StartedAt = s.StartedAt
		}
		w.EndedAt = later(w.EndedAt, s.EndedAt)
		w.Sent += s.Sent
		w.Expected += s.Expected
		w.Received += s.Received
		w.ReceivedAll += s.ReceivedAll
		w.Lost += s.Lost
		w.Joined += s.Joined
		w.ConnectErrors += s.ConnectErrors
		w.Disconnects += s.Disconnects
		w.SendErrors += s.SendErrors
		w.PollErrors += s.PollErrors
		w.ServerErrors += s.ServerErrors
		w.RateLimited += s.RateLimited
		w.Unavailable += s.Unavailable
		w.Unexpected += s.Unexpected
		if s.Saturated && !w.Saturated {
			w.Saturated, w.SaturationReason = true, "step "+s.Name+": "+saturation(true, s.SaturationReason)
		}
	}
	if w.Expected > 0 {
		w.DeliveryRatio = float64(w.Received) / float64(w.Expected)
	}
	return w
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// AsRun marks s, the figures of a pooled run (Pool), as the whole run's,
// with the servers' CPU per delivery summed step by step over each step's
// sending and drain: the connects and pauses between steps are left out,
// as they are from every step's own figure. It is measured only when it
// is for every step that delivered.
func AsRun(s Step, steps []results.StepMeta, server []results.ServerRow) Step {
	s.Name, s.Whole = RunStep, true
	delete(s.Figures, "cpu_per_delivery")
	var cpu float64
	var deliveries int64
	for _, st := range steps {
		if st.ReceivedAll == 0 {
			continue
		}
		per, ok := CPUPerDelivery(server, st.SendStartedAt, st.SendEndedAt, st.ReceivedAll)
		if !ok {
			return s
		}
		cpu += per * float64(st.ReceivedAll)
		deliveries += st.ReceivedAll
	}
	if deliveries > 0 {
		s.Figures["cpu_per_delivery"] = cpu / float64(deliveries)
	}
	return s
}
