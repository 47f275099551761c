//go:build linux

package loadtest

import (
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

func TestSince(t *testing.T) {
	for _, tt := range []struct {
		prev, cur, want int64
	}{
		{0, 0, 0},
		{0, 5, 5},
		{10, 15, 5},
		{15, 15, 0},
		{31132, 40, 40}, // restarted at a step's start: all of it is new
		{583, 0, 0},
	} {
		if got := since(tt.prev, tt.cur); got != tt.want {
			t.Errorf("since(%d, %d) = %d, want %d", tt.prev, tt.cur, got, tt.want)
		}
	}
}

var rateRe = regexp.MustCompile(`conns (\d+)/(\d+).* \| sent (-?\d+)/s recv (-?\d+)/s`)

// progressLine feeds one update to a and returns the line's connections,
// target and rates.
func progressLine(t *testing.T, a *aggregator, out *strings.Builder, snaps ...Snapshot) (conns, target, sent, recv int64) {
	t.Helper()
	out.Reset()
	a.update(snaps)
	m := rateRe.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no rates in %q", out.String())
	}
	n := make([]int64, 4)
	for i := range n {
		n[i], _ = strconv.ParseInt(m[i+1], 10, 64)
	}
	return n[0], n[1], n[2], n[3]
}

// TestProgressStepChange replays what one part reports across a step
// change: the pause already names the next step (and its target) while the
// counters still hold the last step's totals, then the counters start
// again from 0. The rates must follow the messages, never go negative.
func TestProgressStepChange(t *testing.T) {
	var out strings.Builder
	a := newAggregator(&out, false, 2)
	snap := func(step, phase string, target, conns, sent, recv int64) Snapshot {
		return Snapshot{Step: step, Phase: phase, Target: target, Connected: conns, Sent: sent, Received: recv, Interval: 1}
	}
	for i, tt := range []struct {
		s                         Snapshot
		conns, target, sent, recv int64
	}{
		{snap("s1", phaseSending, 100, 100, 500, 4000), 100, 100, 500, 4000},
		{snap("s1", phaseSending, 100, 100, 1083, 7132), 100, 100, 583, 3132},
		{snap("s1", phaseDraining, 100, 100, 1083, 7200), 100, 100, 0, 68},
		{snap("s2", phasePause, 1000, 0, 1083, 7200), 0, 1000, 0, 0},
		{snap("s2", phaseConnecting, 1000, 812, 0, 0), 812, 1000, 0, 0},
		{snap("s2", phaseSending, 1000, 1000, 300, 3000), 1000, 1000, 300, 3000},
		{snap("s2", phaseSending, 1000, 1000, 900, 9000), 1000, 1000, 600, 6000},
	} {
		conns, target, sent, recv := progressLine(t, a, &out, tt.s)
		if conns != tt.conns || target != tt.target || sent != tt.sent || recv != tt.recv {
			t.Errorf("update %d (%s %s): conns %d/%d sent %d/s recv %d/s, want conns %d/%d sent %d/s recv %d/s: %q",
				i, tt.s.Step, tt.s.Phase, conns, target, sent, recv, tt.conns, tt.target, tt.sent, tt.recv, out.String())
		}
	}
}

// TestProgressPartsChangeStepApart: two parts (workers) whose counters
// restart at different updates still add up to the messages of the
// interval.
func TestProgressPartsChangeStepApart(t *testing.T) {
	var out strings.Builder
	a := newAggregator(&out, false, 2)
	p := func(step string, sent int64) Snapshot {
		return Snapshot{Step: step, Phase: phaseSending, Target: 50, Connected: 50, Sent: sent, Received: sent, Interval: 1}
	}
	for i, tt := range []struct {
		a, b Snapshot
		want int64
	}{
		{p("s1", 1000), p("s1", 1000), 2000},
		{p("s1", 2000), p("s1", 2000), 2000},
		{p("s2", 10), p("s1", 2500), 510},
		{p("s2", 110), p("s2", 20), 120},
	} {
		_, target, sent, recv := progressLine(t, a, &out, tt.a, tt.b)
		if sent != tt.want || recv != tt.want || target != 100 {
			t.Errorf("update %d: sent %d/s recv %d/s target %d, want %d/s and target 100: %q", i, sent, recv, target, tt.want, out.String())
		}
	}
}

// TestProgressOfARun reads the progress lines of a real two-step run: each
// line shows the target of the step it names (the next step's from its
// pause on), and no rate is ever negative.
func TestProgressOfARun(t *testing.T) {
	srv := startFakeServer(t, nil)
	s1, s2 := testStep("s1", 2, 3), testStep("s2", 3, 3)
	s2.Drain = Duration(time.Second)
	cfg := testConfig(t, srv.URL, s1, s2)
	cfg.Progress, cfg.Pause = 100*time.Millisecond, Duration(500*time.Millisecond)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var progress testsupport.SyncBuffer
	opt := Options{Stdout: io.Discard, Stderr: &progress, Machine: InspectMachine()}
	if _, err := Run(t.Context(), context.Background(), cfg, opt); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := map[string]string{"s1": "6", "s2": "9"}
	seen := map[string]bool{}
	for line := range strings.Lines(progress.String()) {
		m := rateRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(line) // time, step, phase, …
		step, phase := f[1], f[2]
		seen[step+" "+phase] = true
		if m[2] != want[step] || strings.HasPrefix(m[3], "-") || strings.HasPrefix(m[4], "-") {
			t.Errorf("line %q: want conns …/%s and no negative rate", line, want[step])
		}
	}
	for _, p := range []string{"s1 sending", "s2 pause", "s2 sending"} {
		if !seen[p] {
			t.Errorf("no progress line of %s in:\n%s", p, progress.String())
		}
	}
}
