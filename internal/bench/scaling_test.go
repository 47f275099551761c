//go:build linux

package bench

import (
	"slices"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

func TestLoopCounts(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{1, []int{1}}, {2, []int{1, 2}}, {6, []int{1, 2, 4, 6}}, {8, []int{1, 2, 4, 8}}, {16, []int{1, 2, 4, 8, 16}},
	} {
		if got := loopCounts(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("%d CPUs: %v, want %v", tc.n, got, tc.want)
		}
	}
}

// TestScalingMet: a step is below the knee when it delivered everything,
// kept every connection and its p99 stayed under 100 ms.
func TestScalingMet(t *testing.T) {
	ok := results.StepMeta{Expected: 100, LocalClients: 10, Joined: 10, LatencyMs: results.Percentiles{P99: 20}}
	slow, lost := ok, ok
	slow.LatencyMs.P99 = 150
	lost.Lost = 1
	for _, tc := range []struct {
		name string
		s    results.StepMeta
		want bool
	}{{"met", ok, true}, {"p99 over 100 ms", slow, false}, {"a message lost", lost, false}} {
		if got := scalingMet(tc.s); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestScalingStart: a loop starts at 10k deliveries/s, or at one full
// room when the rooms are so big that 10k would not fill one.
func TestScalingStart(t *testing.T) {
	for _, tc := range []struct{ room, want int }{{4, 10000}, {50, 10000}, {100, 10000}, {500, 250000}} {
		if got := scalingStart(tc.room); got != tc.want {
			t.Errorf("rooms of %d: %d, want %d", tc.room, got, tc.want)
		}
	}
}
