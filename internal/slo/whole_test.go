package slo

import (
	"math"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// TestWholeRun: run: objectives are judged once on the steps pooled, the
// others on each step and never on the pool.
func TestWholeRun(t *testing.T) {
	t0 := time.Unix(100, 0)
	steps := []results.StepMeta{
		{Name: "s1", Expected: 1000, Received: 1000, ReceivedAll: 1000, ConnectErrors: 1, Joined: 10, StartedAt: t0,
			SendStartedAt: t0.Add(time.Second), SendEndedAt: t0.Add(3 * time.Second), EndedAt: t0.Add(4 * time.Second)},
		{Name: "s2", Expected: 3000, Received: 2970, ReceivedAll: 2970, Lost: 30, ConnectErrors: 1, Joined: 10, StartedAt: t0.Add(10 * time.Second),
			SendStartedAt: t0.Add(11 * time.Second), SendEndedAt: t0.Add(13 * time.Second), EndedAt: t0.Add(14 * time.Second)},
	}
	// 0.1 s of CPU in s1's window, 0.3 s in s2's, 5 s in the pause between
	// them (connects), which no figure counts.
	us := func(d time.Duration) int64 { return t0.Add(d).UnixMicro() }
	rows := []results.ServerRow{{UnixUS: us(time.Second), Node: "a", CPUSeconds: 1}, {UnixUS: us(3 * time.Second), Node: "a", CPUSeconds: 1.1},
		{UnixUS: us(11 * time.Second), Node: "a", CPUSeconds: 6.1}, {UnixUS: us(13 * time.Second), Node: "a", CPUSeconds: 6.4}}
	w := Pool(steps)
	if w.Name != "run" || w.Expected != 4000 || w.Lost != 30 || w.ConnectErrors != 2 || !w.StartedAt.Equal(t0) || !w.EndedAt.Equal(t0.Add(14*time.Second)) {
		t.Errorf("pooled %+v", w)
	}
	w.LatencyMs = results.Percentiles{P99: 40}
	figs := []Step{FromMeta(steps[0], rows), FromMeta(steps[1], rows), AsRun(FromMeta(w, nil), steps, rows)}
	run := figs[2]
	if cpu := run.Figures["cpu_per_delivery"]; math.Abs(cpu-400.0/3970) > 1e-9 || math.Abs(run.Figures["delivery"]-3970.0/4000) > 1e-12 {
		t.Errorf("the run's cpu_per_delivery %v ms, delivery %v", cpu, run.Figures["delivery"])
	}
	objs, err := Parse("connect_errors<2,run:connect_errors<2,run:p99<50ms")
	if err != nil {
		t.Fatal(err)
	}
	rs := Evaluate(objs, figs)
	want := []struct {
		step string
		v    Verdict
	}{{"s1", Met}, {"s2", Met}, {"run", Missed}, {"run", Met}}
	if len(rs) != len(want) {
		t.Fatalf("results %+v", rs)
	}
	for i, w := range want {
		if rs[i].Step != w.step || rs[i].Verdict != w.v {
			t.Errorf("result %d: %s %s %s, want %s %s", i, rs[i].Step, rs[i].SLO, rs[i].Verdict, w.step, w.v)
		}
	}
	// A saturated step makes the run inconclusive; a step whose CPU was
	// not measured leaves the run's unmeasured.
	steps[1].Saturated, steps[1].SaturationReason = true, "send lag p99 150ms"
	if r := Evaluate(objs[2:], []Step{AsRun(FromMeta(Pool(steps), nil), steps, rows[:2])})[0]; r.Verdict != Inconclusive ||
		r.Reason != "p99 = 0ms, but the load generator saturated (step s2: send lag p99 150ms): the figure is not the server's" {
		t.Errorf("saturated: %+v", r)
	}
	if _, ok := AsRun(FromMeta(Pool(steps), nil), steps, rows[:2]).Figures["cpu_per_delivery"]; ok {
		t.Error("the run's CPU measured though step s2's was not")
	}
}
