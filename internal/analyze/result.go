package analyze

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// Result is what an analysis found: summary.json (results.Summary), the
// time series of timeseries.csv, and how long the analysis took.
type Result struct {
	results.Summary
	Elapsed time.Duration
	Series  []results.SeriesPoint
}

// HistogramNote describes the percentile method, for the outputs.
const HistogramNote = "HdrHistogram, 3 significant digits (values within 0.1%), nearest-rank percentiles reported as the bucket's upper bound capped at the exact max; mean, stddev, min and max exact"

func ms(us int64) float64 { return float64(us) / 1000 }

func fillLatency(l *results.Latency, a *latAcc) {
	if a.n == 0 {
		return
	}
	qs := a.quantiles(results.Quantiles)
	pct := make([]float64, len(qs))
	for i, v := range qs {
		pct[i] = ms(v)
	}
	l.SetPercentiles(pct)
	l.Min, l.Max = ms(a.min), ms(a.max)
	mean, std := a.meanStd()
	l.Mean, l.Stddev = mean/1000, std/1000
}

// assemble merges the partitions' accumulators into a Result.
func assemble(nm *names, partitions []*partition, opts Options) *Result {
	res := &Result{Summary: results.Summary{
		Window:    opts.Window.String(),
		Interval:  opts.Interval.String(),
		Histogram: HistogramNote,
	}}
	nsteps := len(nm.stepList)
	total := &stepAcc{lat: newLatAcc(), first: math.MaxInt64, last: math.MinInt64}
	allClients := make(map[uint64]struct{})
	type stepOut struct {
		s     results.StepStats
		start int64
	}
	var out []stepOut
	srsOf := make([][]int, nsteps)
	for sr, n := range nm.srList {
		srsOf[n.step] = append(srsOf[n.step], sr)
	}
	for id := range nsteps {
		acc := &stepAcc{lat: newLatAcc(), first: math.MaxInt64, last: math.MinInt64, clients: make(map[uint64]struct{})}
		for _, sh := range partitions {
			if id < len(sh.steps) && sh.steps[id] != nil {
				acc.add(sh.steps[id])
				for c := range sh.steps[id].clients {
					acc.clients[c] = struct{}{}
				}
			}
		}
		rooms := stepRooms(nm, partitions, srsOf[id])
		if acc.first == math.MaxInt64 && len(rooms) == 0 {
			continue // a name seen only on malformed paths
		}
		s := results.StepStats{Step: nm.stepList[id], Clients: int64(len(acc.clients)), Rooms: int64(len(rooms))}
		for _, in := range opts.Inputs {
			if in.Old && in.Step == s.Step {
				s.Rooms = int64(in.Rooms)
			}
		}
		fillCounts(&s, acc)
		s.HotRooms, s.RoomSkew = hottest(rooms, opts.TopRooms)
		out = append(out, stepOut{s, acc.first})
		for c := range acc.clients {
			allClients[c] = struct{}{}
		}
		total.add(acc)
	}
	slices.SortStableFunc(out, func(a, b stepOut) int { return cmp.Compare(a.start, b.start) })
	for _, o := range out {
		res.Steps = append(res.Steps, o.s)
	}
	// A room belongs to its step (docs/csv.md): the rooms of the run are
	// the sum of the steps' rooms, even when names repeat.
	res.Overall = results.StepStats{Step: "all", Clients: int64(len(allClients))}
	for _, s := range res.Steps {
		res.Overall.Rooms += s.Rooms
	}
	fillCounts(&res.Overall, total)
	for _, sh := range partitions {
		res.PeakInFlight += int64(sh.peak)
	}
	res.Series = series(nm, partitions, res.Steps, opts.Interval)
	return res
}

// add adds the counts and latencies of b to a (not the clients).
func (a *stepAcc) add(b *stepAcc) {
	a.sent += b.sent
	a.expected += b.expected
	a.received += b.received
	a.lost += b.lost
	a.orphans += b.orphans
	a.duplicates += b.duplicates
	a.lat.merge(b.lat)
	a.first = min(a.first, b.first)
	a.last = max(a.last, b.last)
}

// stepRooms merges the figures of a step's rooms (srs) across partitions; rooms
// that saw no event are left out.
func stepRooms(nm *names, partitions []*partition, srs []int) []results.RoomStats {
	var rooms []results.RoomStats
	for _, sr := range srs {
		r := results.RoomStats{Room: nm.srList[sr].room}
		var latSum, latMax int64
		active := false
		for _, sh := range partitions {
			if sr >= len(sh.rooms) {
				continue
			}
			a := &sh.rooms[sr]
			active = active || a.active
			if sh.id == 0 {
				r.Members = a.members
			}
			r.Sent += a.sent
			r.Expected += a.expected
			r.Received += a.received
			r.Lost += a.lost
			latSum += a.latSum
			latMax = max(latMax, a.latMax)
		}
		if !active {
			continue
		}
		if r.Received > 0 {
			r.MeanMs = ms(latSum) / float64(r.Received)
			r.MaxMs = ms(latMax)
		}
		rooms = append(rooms, r)
	}
	return rooms
}

// series merges the partitions' time series of the steps reported, in step
// order and then time order.
func series(nm *names, partitions []*partition, steps []results.StepStats, interval time.Duration) []results.SeriesPoint {
	merged := make(map[seriesKey]*seriesAcc)
	for _, sh := range partitions {
		for k, a := range sh.series {
			m := merged[k]
			if m == nil {
				m = &seriesAcc{}
				merged[k] = m
			}
			m.sent += a.sent
			m.recv += a.recv
			m.hist.merge(&a.hist)
		}
	}
	order := make(map[string]int)
	for i, s := range steps {
		order[s.Step] = i
	}
	sec := float64(interval) / float64(time.Second)
	var out []results.SeriesPoint
	for k, a := range merged {
		name := nm.stepList[k.step]
		if _, ok := order[name]; !ok {
			continue
		}
		out = append(out, results.SeriesPoint{
			Step: name, UnixUS: k.idx * interval.Microseconds(), Sent: a.sent, Deliveries: a.recv,
			PerSecond: float64(a.recv) / sec, P50Ms: ms(a.hist.quantile(.5)), P99Ms: ms(a.hist.quantile(.99)),
		})
	}
	slices.SortFunc(out, func(a, b results.SeriesPoint) int {
		return cmp.Or(cmp.Compare(order[a.Step], order[b.Step]), cmp.Compare(a.UnixUS, b.UnixUS))
	})
	return out
}

func fillCounts(s *results.StepStats, a *stepAcc) {
	s.Sent, s.Expected, s.Received, s.Lost = a.sent, a.expected, a.received, a.lost
	s.Orphans, s.Duplicates = a.orphans, a.duplicates
	if a.expected > 0 {
		s.DeliveryRatio = float64(a.received) / float64(a.expected)
	}
	fillLatency(&s.Latency, a.lat)
	s.NegativeLatencies = a.lat.negative
	if a.first != math.MaxInt64 {
		s.StartUnixUS, s.EndUnixUS = a.first, a.last
	}
}

// hottest returns the n rooms with the most expected deliveries and the
// skew (busiest over mean).
func hottest(rooms []results.RoomStats, n int) ([]results.RoomStats, float64) {
	if len(rooms) == 0 {
		return nil, 0
	}
	var sum int64
	for _, r := range rooms {
		sum += r.Expected
	}
	slices.SortStableFunc(rooms, func(a, b results.RoomStats) int {
		return cmp.Or(cmp.Compare(b.Expected, a.Expected), cmp.Compare(b.Sent, a.Sent), cmp.Compare(a.Room, b.Room))
	})
	skew := 0.0
	if sum > 0 {
		skew = float64(rooms[0].Expected) / (float64(sum) / float64(len(rooms)))
	}
	if len(rooms) == 1 && rooms[0].Room == "" {
		return nil, skew // older format: no room names
	}
	return slices.Clone(rooms[:min(n, len(rooms))]), skew
}

// Check reports, in one sentence, an analysis that cannot be trusted: no row
// parsed, or more malformed rows than the fraction maxMalformed of all rows.
func (r *Result) Check(maxMalformed float64) error {
	total := r.Rows + r.Malformed + r.Ignored
	if r.Rows == 0 {
		if total == 0 {
			return errors.New("the input holds no rows")
		}
		return fmt.Errorf("none of the %d rows is a chat event in a known format (%d malformed, %d ignored; see docs/csv.md)",
			total, r.Malformed, r.Ignored)
	}
	if float64(r.Malformed) > maxMalformed*float64(total) {
		return fmt.Errorf("%d of %d rows are malformed (%.2f %%), more than --max-malformed %.2f %%",
			r.Malformed, total, 100*float64(r.Malformed)/float64(total), 100*maxMalformed)
	}
	return nil
}
