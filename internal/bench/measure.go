//go:build linux

package bench

import (
	"math"
	"slices"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// roundTrips reads a load test's events file and returns, for every message
// sent, how long it took to come back to its sender (-1: it never did).
func roundTrips(path string) ([]time.Duration, error) {
	type key struct{ sender, id uint64 }
	due := map[key]int64{}
	back := map[key]int64{}
	err := results.ReadEvents(path, func(e *results.Event) error {
		k := key{e.SenderID, e.MessageID}
		switch {
		case e.Kind == results.Sent:
			due[k] = e.UnixUS
		case e.Kind == results.Received && e.ClientID == e.SenderID:
			if _, seen := back[k]; !seen {
				back[k] = e.UnixUS
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, len(due))
	for k, d := range due {
		rt := time.Duration(-1)
		if b, ok := back[k]; ok {
			rt = time.Duration(max(b-d, 0)) * time.Microsecond
		}
		out = append(out, rt)
	}
	return out, nil
}

// Measure fills the row of one run from its events file and its step in
// meta.json: a message counts as received when it came back to its sender
// within timeout; every client whose message did not is an error.
// Each message is owed its echo alone: every client of the comparison is
// alone in its room (--room-size 1), where results.Owed counts the sender
// only; Measure counts one per message without reading the Joined rows.
func Measure(transport, events string, s results.StepMeta, timeout time.Duration) (results.ComparisonRow, error) {
	rts, err := roundTrips(events)
	if err != nil {
		return results.ComparisonRow{}, err
	}
	row := results.ComparisonRow{Transport: transport, Clients: s.Clients, Sent: int64(len(rts)), ConnectErrors: s.ConnectErrors,
		RequestErrors: s.SendErrors + s.PollErrors + s.Disconnects, Saturated: s.Saturated}
	var ok []time.Duration
	for _, rt := range rts {
		if rt >= 0 && rt <= timeout {
			ok = append(ok, rt)
		}
	}
	row.Received = int64(len(ok))
	row.Timeouts = row.Sent - row.Received
	row.Errors = max(int64(s.Clients)-row.Received, 0)
	slices.Sort(ok)
	row.P50, row.P90, row.P99 = percentileMs(ok, 50), percentileMs(ok, 90), percentileMs(ok, 99)
	if len(ok) > 0 {
		row.Max = durMs(ok[len(ok)-1])
	}
	return row, nil
}

// percentileMs is the nearest-rank percentile of sorted durations, in ms.
func percentileMs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return durMs(sorted[max(rank, 1)-1])
}

func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
