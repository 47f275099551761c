//go:build linux

package bench

import (
	"bytes"
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
