//go:build linux

package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
)

func TestLoopbackURL(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want bool
	}{
		{"ws://127.0.0.1:8080/ws", true},
		{"ws://127.3.0.9:1/ws", true},
		{"ws://[::1]:8080/ws", true},
		{"ws://10.0.0.5:8080/ws", false},
		{"ws://localhost:8080/ws", false}, // a name: its address is not known here
		{"://bad", false},
	} {
		if got := loopbackURL(tt.url); got != tt.want {
			t.Errorf("loopbackURL(%q) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

// The server's CPU between a step's start and its first send, over the
// clients that joined, is its cost per connection accepted.
func TestTargetRowCPUPerConnect(t *testing.T) {
	t0 := time.Unix(1000, 0)
	srv := &sampler{samples: []sample{
		{at: t0, cpu: 0, rss: 10 << 20},
		{at: t0.Add(2 * time.Second), cpu: 300 * time.Millisecond, rss: 40 << 20}, // 1,500 connects: 200 µs each
		{at: t0.Add(4 * time.Second), cpu: 320 * time.Millisecond, rss: 40 << 20},
	}}
	s := results.StepMeta{Name: "idle", Clients: 1500, Joined: 1500, StartedAt: t0, SendStartedAt: t0.Add(2 * time.Second),
		SendEndedAt: t0.Add(4 * time.Second)}
	row := targetRow(loadtest.Target{Name: "a"}, s, &genRun{name: "a"}, srv, sample{rss: 10 << 20})
	if math.Abs(row.CPUPerConnect-200) > 1e-6 {
		t.Errorf("CPUPerConnect = %v µs, want 200", row.CPUPerConnect)
	}
	if want := float64(30<<20) / 1500; math.Abs(row.RSSPerConn-want) > 1e-6 {
		t.Errorf("RSSPerConn = %v, want %v", row.RSSPerConn, want)
	}
	s.Joined = 0
	if row := targetRow(loadtest.Target{Name: "a"}, s, &genRun{name: "a"}, srv, sample{}); row.CPUPerConnect != 0 {
		t.Errorf("nobody joined: CPUPerConnect = %v, want 0", row.CPUPerConnect)
	}
}

func TestTargetRatios(t *testing.T) {
	ok := func(target, step string, del, conn, rss float64) results.TargetRow {
		return results.TargetRow{Target: target, Step: step, Joined: 10, Sent: 10, Received: 10, CPUPerDelivery: del, CPUPerConnect: conn, RSSPerConn: rss}
	}
	idle := ok("b", "idle", 0, 90, 3000)
	idle.Sent, idle.Received = 0, 0
	idleBase := ok("a", "idle", 0, 200, 1500)
	idleBase.Sent, idleBase.Received = 0, 0
	rows := []results.TargetRow{
		idleBase, ok("a", "one", 6, 0, 0),
		idle, ok("b", "one", 5, 0, 0),
		{Target: "c", Step: "one", Joined: 0}, // failed: no ratio
		ok("d", "other", 1, 1, 1),             // a step the first target did not run
	}
	got := targetRatios(rows)
	if len(got) != 2 {
		t.Fatalf("%d ratios, want 2: %+v", len(got), got)
	}
	if r := got[0]; r.target != "b" || r.base != "a" || r.step != "idle" || r.cpuDelivery != 0 || r.cpuConnect != 0.45 || r.rssC != 2 {
		t.Errorf("idle ratio %+v", r)
	}
	if r := got[1]; r.step != "one" || math.Abs(r.cpuDelivery-5.0/6) > 1e-9 || r.cpuConnect != 0 {
		t.Errorf("one ratio %+v", r)
	}
	var b bytes.Buffer
	printRatios(&b, rows)
	for _, want := range []string{"over the first target's", "×0.45", "×2.00", "×0.83", "n/a"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printed ratios lack %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	printRatios(&b, rows[:2])
	if b.Len() != 0 {
		t.Errorf("one target printed ratios:\n%s", b.String())
	}
}

// A CPU figure made of fewer than ten 10 ms clock ticks is withheld: "–"
// with the reason in the table, the ratios and targets.json, never a
// number such as 125 vs 62.5 µs per delivery, "×0.50", read off one or two
// ticks.
func TestCPUFiguresOfTooFewTicksAreWithheld(t *testing.T) {
	t0 := time.Unix(1000, 0)
	step := results.StepMeta{Name: "s1", Clients: 4, Joined: 4, Sent: 40, Received: 160, ReceivedAll: 160, DeliveryRatio: 1,
		StartedAt: t0, SendStartedAt: t0.Add(time.Second), SendEndedAt: t0.Add(2 * time.Second)}
	row := func(name string, connectCPU, sendCPU time.Duration) results.TargetRow {
		srv := &sampler{samples: []sample{
			{at: t0, cpu: 0},
			{at: t0.Add(time.Second), cpu: connectCPU},
			{at: t0.Add(2 * time.Second), cpu: connectCPU + sendCPU},
		}}
		return targetRow(loadtest.Target{Name: name}, step, &genRun{name: name}, srv, sample{})
	}
	tests := []struct {
		name                        string
		connect, send               time.Duration
		delivery, perConnect        float64
		deliveryShort, connectShort bool
	}{
		{"both readable", 400 * time.Millisecond, 160 * time.Millisecond, 1000, 100000, false, false},
		{"two ticks while sending", 400 * time.Millisecond, 20 * time.Millisecond, 0, 100000, true, false},
		{"one tick while connecting", 10 * time.Millisecond, 160 * time.Millisecond, 1000, 0, false, true},
		{"nine ticks each", 90 * time.Millisecond, 90 * time.Millisecond, 0, 0, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := row("a", tt.connect, tt.send)
			if math.Abs(r.CPUPerDelivery-tt.delivery) > 1e-6 || math.Abs(r.CPUPerConnect-tt.perConnect) > 1e-6 ||
				r.CPUDeliveryTooFew != tt.deliveryShort || r.CPUConnectTooFew != tt.connectShort {
				t.Fatalf("row %+v", r)
			}
			if short := tt.deliveryShort || tt.connectShort; short != strings.Contains(r.CPUNote, "fewer than the 10 that read it to 10 %") {
				t.Errorf("CPUNote %q", r.CPUNote)
			}
		})
	}

	// Two targets, the second's sending window two ticks long.
	rows := []results.TargetRow{row("a", 400*time.Millisecond, 160*time.Millisecond), row("b", 400*time.Millisecond, 20*time.Millisecond)}
	var b bytes.Buffer
	printTargets(&b, &results.Targets{Rows: rows})
	out := b.String()
	for _, want := range []string{"CPU/delivery: – (2 CPU clock ticks of 10 ms", "– = a side's CPU time held fewer than 10 clock ticks"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "×0.") || strings.Contains(out, "125.00") {
		t.Errorf("a ratio or a figure of two ticks is printed:\n%s", out)
	}
	var back results.TargetRow
	j, _ := json.Marshal(rows[1])
	if err := json.Unmarshal(j, &back); err != nil || !back.CPUDeliveryTooFew || back.CPUPerDelivery != 0 || back.CPUNote != rows[1].CPUNote {
		t.Errorf("targets.json row %s, read back %+v (%v)", j, back, err)
	}
}
