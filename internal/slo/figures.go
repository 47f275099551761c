package slo

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// FromMeta returns the figures of a load test's step (meta.json). With
// server rows (<out>.server.csv) it adds cpu_per_delivery: the servers'
// CPU time over the step's sending and draining, per delivery received.
func FromMeta(s results.StepMeta, server []results.ServerRow) Step {
	f := map[string]float64{
		"connect_errors": float64(s.ConnectErrors),
		"disconnects":    float64(s.Disconnects),
		"errors":         float64(s.ConnectErrors + s.Disconnects + s.SendErrors + s.PollErrors),
		// error frames (rate_limited among them), or, polling, POSTs answered 429
		"refusals":     float64(max(s.ServerErrors, s.RateLimited)),
		"rate_limited": float64(s.RateLimited),
		"unavailable":  float64(s.Unavailable),
		"unexpected":   float64(s.Unexpected),
		"lost":         float64(s.Lost),
	}
	if s.Expected > 0 {
		f["delivery"] = float64(s.Received) / float64(s.Expected)
		f["loss"] = float64(s.Lost) / float64(s.Expected)
	}
	if s.Received > 0 {
		f["p50"], f["p90"], f["p99"], f["max"] = s.LatencyMs.P50, s.LatencyMs.P90, s.LatencyMs.P99, s.LatencyMs.Max
		if s.LatencyMs.P999 > 0 {
			f["p99.9"] = s.LatencyMs.P999
		}
	}
	if s.Joined > 0 {
		f["connect_p99"] = s.ConnectMs.P99
	}
	if cpu, ok := CPUPerDelivery(server, s.SendStartedAt, s.SendEndedAt, s.ReceivedAll); ok {
		f["cpu_per_delivery"] = cpu
	}
	return Step{Name: s.Name, Figures: f, Saturated: saturation(s.Saturated, s.SaturationReason)}
}

// FromStats returns the figures of an analysed step (summary.json). The
// analysis has no connection counts; those come from the run's meta.json
// step when it was found (meta may be nil).
func FromStats(s results.StepStats, meta *results.StepMeta, server []results.ServerRow) Step {
	f := map[string]float64{"lost": float64(s.Lost)}
	if meta != nil {
		f = FromMeta(*meta, server).Figures
		f["lost"] = float64(s.Lost)
		delete(f, "p99.9")
	}
	if s.Expected > 0 {
		f["delivery"] = float64(s.Received) / float64(s.Expected)
		f["loss"] = float64(s.Lost) / float64(s.Expected)
	} else {
		delete(f, "delivery")
		delete(f, "loss")
	}
	if s.Measured() {
		f["p50"], f["p90"], f["p99"], f["p99.9"], f["max"] = s.P50, s.P90, s.P99, s.P999, s.Max
	} else {
		for _, k := range []string{"p50", "p90", "p99", "p99.9", "max"} {
			delete(f, k)
		}
	}
	return Step{Name: s.Step, Figures: f, Saturated: saturation(s.Saturated, s.SaturationReason)}
}

func saturation(saturated bool, reason string) string {
	if saturated && reason == "" {
		return "reason not recorded"
	}
	return reason
}

// CPUPerDelivery returns the CPU time, in milliseconds, the servers of rows
// spent per delivery between from and to: for each node the difference of
// its CPU seconds from its last scrape at or before from (its first, when
// none) to its first at or after to (its last, when none). It reports
// false when no node has two scrapes that far apart or nothing was
// delivered.
func CPUPerDelivery(rows []results.ServerRow, from, to time.Time, deliveries int64) (float64, bool) {
	if len(rows) == 0 || deliveries <= 0 || from.IsZero() || !to.After(from) {
		return 0, false
	}
	byNode := map[string][]results.ServerRow{}
	for _, r := range rows {
		if !math.IsNaN(r.CPUSeconds) {
			byNode[r.Node] = append(byNode[r.Node], r)
		}
	}
	a, b := from.UnixMicro(), to.UnixMicro()
	cpu, measured := 0.0, false
	for _, rs := range byNode {
		sort.Slice(rs, func(i, j int) bool { return rs[i].UnixUS < rs[j].UnixUS })
		first, last := 0, len(rs)-1
		for i, r := range rs {
			if r.UnixUS <= a {
				first = i
			}
		}
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].UnixUS >= b {
				last = i
			}
		}
		if last > first {
			cpu += rs[last].CPUSeconds - rs[first].CPUSeconds
			measured = true
		}
	}
	if !measured {
		return 0, false
	}
	return cpu * 1000 / float64(deliveries), true
}

// FromTarget returns the figures of one step against one server of a
// comparison (bench compare), named "TARGET/STEP". Its server CPU per
// delivery is the bench's, from /proc.
func FromTarget(r results.TargetRow) Step {
	f := map[string]float64{"unexpected": float64(r.Unexpected), "errors": float64(r.Errors)}
	if r.Expected > 0 {
		f["delivery"] = float64(r.Received) / float64(r.Expected)
		f["loss"] = float64(max(r.Expected-r.Received, 0)) / float64(r.Expected)
		f["lost"] = float64(max(r.Expected-r.Received, 0))
	}
	if r.Measured() {
		f["p50"], f["p90"], f["p99"], f["max"] = r.P50, r.P90, r.P99, r.Max
	}
	if r.CPUPerDelivery > 0 {
		f["cpu_per_delivery"] = r.CPUPerDelivery / 1000
	}
	if r.MemoryMeasured() {
		f["rss_per_conn"] = r.RSSPerConn
	}
	sat := ""
	if r.Saturated {
		sat = saturation(true, r.Note)
	}
	return Step{Name: r.Target + "/" + r.Step, Figures: f, Saturated: sat}
}

// AuditStep names the one step of an audit's figures.
const AuditStep = "audit"

// AuditMetrics are the metrics an audit measures (FromAudit's figures),
// and AuditOnly those of them no load test measures.
var (
	AuditMetrics = []string{"delivery", "loss", "lost", "duplicates", "reordered", "recovery"}
	AuditOnly    = []string{"duplicates", "reordered", "recovery"}
)

// FromAudit returns the figures of an audit, judged as one step named
// "audit": delivery and lost as a load test counts them (owed ÷
// delivered), duplicates, reordered, and recovery, the longest time from
// a fault until every client was back in its room (not measured without
// faults; never, when a fault was not recovered from).
func FromAudit(a *results.Audit) Step {
	f := map[string]float64{"duplicates": float64(a.Duplicates), "reordered": float64(a.Reordered),
		"lost": float64(max(a.Expected-a.Delivered, 0))}
	if a.Expected > 0 {
		f["delivery"] = float64(a.Delivered) / float64(a.Expected)
		f["loss"] = f["lost"] / float64(a.Expected)
	}
	s := Step{Name: AuditStep, Figures: f}
	for i, ft := range a.Faults {
		if !ft.RecoveredOK {
			s.Never = map[string]string{"recovery": fmt.Sprintf("fault %d of %d (%s on %s) was not recovered from before the audit ended", i+1, len(a.Faults), ft.Kind, ft.Target)}
			return s
		}
		f["recovery"] = max(f["recovery"], float64(ft.Recovered)/float64(time.Millisecond))
	}
	return s
}
