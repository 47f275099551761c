package slo

import (
	"math"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

func TestFromMeta(t *testing.T) {
	t0 := time.Unix(100, 0)
	s := results.StepMeta{Name: "s1", Expected: 1000, Received: 990, ReceivedAll: 1000, Lost: 10, Joined: 4, ConnectErrors: 1, Disconnects: 2,
		ServerErrors: 5, RateLimited: 3, Unavailable: 1, LatencyMs: results.Percentiles{P50: 1, P90: 2, P99: 3, Max: 9, P999: 5},
		ConnectMs: results.Percentiles{P99: 7}, SendStartedAt: t0, SendEndedAt: t0.Add(2 * time.Second)}
	rows := []results.ServerRow{{UnixUS: t0.UnixMicro() - 5e5, Node: "a", CPUSeconds: 1}, {UnixUS: t0.UnixMicro() + 25e5, Node: "a", CPUSeconds: 1.02}}
	f := FromMeta(s, rows).Figures
	want := map[string]float64{"delivery": 0.99, "loss": 0.01, "lost": 10, "connect_errors": 1, "disconnects": 2, "errors": 3,
		"refusals": 5, "rate_limited": 3, "unavailable": 1, "p50": 1, "p90": 2, "p99": 3, "p99.9": 5, "max": 9, "connect_p99": 7,
		"cpu_per_delivery": 0.02, "unexpected": 0}
	for k, v := range want {
		if got, ok := f[k]; !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
	if len(f) != len(want) {
		t.Errorf("figures %v", f)
	}
	// Nothing delivered: no latencies, no server CPU per delivery.
	f = FromMeta(results.StepMeta{Expected: 10}, rows).Figures
	for _, k := range []string{"p99", "p99.9", "cpu_per_delivery", "connect_p99"} {
		if _, ok := f[k]; ok {
			t.Errorf("%s measured without deliveries", k)
		}
	}
	if f["delivery"] != 0 {
		t.Errorf("delivery %v, want 0", f["delivery"])
	}
}

func TestFromStats(t *testing.T) {
	st := results.StepStats{Step: "s1", Expected: 100, Received: 100, Latency: results.Latency{P50: 1, P99: 2, P999: 3, Max: 4}}
	f := FromStats(st, nil, nil).Figures
	if f["p99.9"] != 3 || f["delivery"] != 1 {
		t.Errorf("figures %v", f)
	}
	if _, ok := f["connect_errors"]; ok {
		t.Error("connect_errors measured without meta.json")
	}
	f = FromStats(st, &results.StepMeta{ConnectErrors: 2}, nil).Figures
	if f["connect_errors"] != 2 {
		t.Errorf("connect_errors from meta: %v", f)
	}
}

// TestFromAudit: an audit is one step; its recovery is the longest fault's,
// absent without faults, and never (any objective on it missed) when a
// fault was not recovered from.
func TestFromAudit(t *testing.T) {
	a := &results.Audit{Expected: 1000, Delivered: 998, AuditCounts: results.AuditCounts{Duplicates: 1, Reordered: 2},
		Faults: []results.AuditFault{
			{Kind: "drop", RecoveredOK: true, Recovered: 80 * time.Millisecond},
			{Kind: "node SIGKILL", RecoveredOK: true, Recovered: 1500 * time.Millisecond},
		}}
	s := FromAudit(a)
	want := map[string]float64{"delivery": 0.998, "loss": 0.002, "lost": 2, "duplicates": 1, "reordered": 2, "recovery": 1500}
	for k, v := range want {
		if got, ok := s.Figures[k]; !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
	if s.Name != "audit" || len(s.Figures) != len(want) || len(AuditMetrics) != len(want) || s.Never != nil {
		t.Errorf("step %+v", s)
	}
	for _, m := range AuditMetrics {
		if _, ok := s.Figures[m]; !ok {
			t.Errorf("AuditMetrics names %s, which FromAudit does not give", m)
		}
	}
	objs, err := Parse("recovery<2s,audit:delivery>=99.9%")
	if err != nil {
		t.Fatal(err)
	}
	if rs := Evaluate(objs, []Step{s}); rs[0].Verdict != Met || rs[0].Value != "1.5s" || rs[1].Verdict != Missed {
		t.Errorf("verdicts %+v", rs)
	}
	if _, ok := FromAudit(&results.Audit{}).Figures["recovery"]; ok {
		t.Error("recovery measured without faults")
	}
	a.Faults = append(a.Faults, results.AuditFault{Kind: "Redis restart", Target: "redis"})
	r := Evaluate(objs[:1], []Step{FromAudit(a)})[0]
	if r.Verdict != Missed || r.Value != "never" || r.Measured != nil ||
		r.Reason != "recovery = never: fault 3 of 3 (Redis restart on redis) was not recovered from before the audit ended" {
		t.Errorf("an unrecovered fault: %+v", r)
	}
}
