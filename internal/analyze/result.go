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

// Result is what an analysis found.
type Result struct {
	Inputs    []string `json:"inputs"`
	Bytes     int64    `json:"bytes"`
	Rows      int64    `json:"rows"`
	Malformed int64    `json:"malformed_rows"`
	// Ignored counts well-formed rows that are not chat events (docs/csv.md).
	Ignored   int64         `json:"ignored_rows"`
	Errors    []string      `json:"malformed_examples,omitempty"`
	Truncated []string      `json:"truncated_files,omitempty"`
	Elapsed   time.Duration `json:"-"`
	Window    string        `json:"window"`
	Interval  string        `json:"interval"`
	// Histogram says how percentiles were computed and how precise they are.
	Histogram string `json:"histogram"`
	// PeakInFlight is the most messages the join held at once (summed
	// over partitions): memory follows it, not the size of the files.
	PeakInFlight int64         `json:"peak_messages_in_flight"`
	Steps        []StepStats   `json:"steps"`
	Overall      StepStats     `json:"overall"`
	Series       []SeriesPoint `json:"-"`
	Meta         *results.Meta `json:"meta,omitempty"`
	// MetaPath and ServerMetrics are the files found beside the inputs.
	MetaPath      string `json:"meta_path,omitempty"`
	ServerMetrics string `json:"server_metrics,omitempty"`
}

// HistogramNote describes the percentile method, for the outputs.
const HistogramNote = "HdrHistogram, 3 significant digits (values within 0.1%), nearest-rank percentiles reported as the bucket's upper bound capped at the exact max; mean, stddev, min and max exact"

// StepStats are the figures of one step, or of the whole run.
type StepStats struct {
	Step     string `json:"step"`
	Clients  int64  `json:"clients"`
	Rooms    int64  `json:"rooms"`
	Sent     int64  `json:"sent"`
	Expected int64  `json:"expected"`
	Received int64  `json:"received"`
	// Lost sums, over messages, the expected deliveries that did not
	// arrive (a message's surplus deliveries do not offset another's loss).
	Lost          int64   `json:"lost"`
	DeliveryRatio float64 `json:"delivery_ratio"`
	Orphans       int64   `json:"orphans"`
	Duplicates    int64   `json:"duplicate_sent"`
	Latency
	NegativeLatencies int64  `json:"negative_latencies"`
	StartUnixUS       int64  `json:"start_unix_us"`
	EndUnixUS         int64  `json:"end_unix_us"`
	Saturated         bool   `json:"saturated"`
	SaturationReason  string `json:"saturation_reason,omitempty"`
	// RoomSkew is the busiest room's expected deliveries over the mean
	// room's: 1 for evenly loaded rooms.
	RoomSkew float64     `json:"room_skew"`
	HotRooms []RoomStats `json:"hot_rooms,omitempty"`
}

// Latency holds per-delivery latency figures in milliseconds.
type Latency struct {
	P10    float64 `json:"p10_ms"`
	P20    float64 `json:"p20_ms"`
	P30    float64 `json:"p30_ms"`
	P40    float64 `json:"p40_ms"`
	P50    float64 `json:"p50_ms"`
	P60    float64 `json:"p60_ms"`
	P70    float64 `json:"p70_ms"`
	P80    float64 `json:"p80_ms"`
	P90    float64 `json:"p90_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	P999   float64 `json:"p99_9_ms"`
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
	Mean   float64 `json:"mean_ms"`
	Stddev float64 `json:"stddev_ms"`
}

// Percentile is one named latency percentile.
type Percentile struct {
	Name     string  // "p50"
	Quantile float64 // 0.5
	Ms       float64
}

// quantiles lists the reported percentiles in order.
var quantiles = []float64{.1, .2, .3, .4, .5, .6, .7, .8, .9, .95, .99, .999}

var quantileNames = []string{"p10", "p20", "p30", "p40", "p50", "p60", "p70", "p80", "p90", "p95", "p99", "p99.9"}

// Percentiles returns the percentiles in increasing order.
func (l *Latency) Percentiles() []Percentile {
	v := l.fields()
	out := make([]Percentile, len(quantiles))
	for i := range quantiles {
		out[i] = Percentile{Name: quantileNames[i], Quantile: quantiles[i], Ms: *v[i]}
	}
	return out
}

func (l *Latency) fields() []*float64 {
	return []*float64{&l.P10, &l.P20, &l.P30, &l.P40, &l.P50, &l.P60, &l.P70, &l.P80, &l.P90, &l.P95, &l.P99, &l.P999}
}

// RoomStats are the figures of one room in one step.
type RoomStats struct {
	Room     string  `json:"room"`
	Members  int64   `json:"members"`
	Sent     int64   `json:"sent"`
	Expected int64   `json:"expected"`
	Received int64   `json:"received"`
	Lost     int64   `json:"lost"`
	MeanMs   float64 `json:"mean_ms"`
	MaxMs    float64 `json:"max_ms"`
}

// SeriesPoint is one interval of one step.
type SeriesPoint struct {
	Step       string
	UnixUS     int64 // interval start
	Sent       int64
	Deliveries int64
	PerSecond  float64 // deliveries per second
	P50Ms      float64
	P99Ms      float64
}

func ms(us int64) float64 { return float64(us) / 1000 }

func fillLatency(l *Latency, a *latAcc) {
	if a.n == 0 {
		return
	}
	for i, v := range a.quantiles(quantiles) {
		*l.fields()[i] = ms(v)
	}
	l.Min, l.Max = ms(a.min), ms(a.max)
	mean, std := a.meanStd()
	l.Mean, l.Stddev = mean/1000, std/1000
}

// assemble merges the partitions' accumulators into a Result.
func assemble(nm *names, partitions []*partition, opts Options) *Result {
	res := &Result{
		Window:    opts.Window.String(),
		Interval:  opts.Interval.String(),
		Histogram: HistogramNote,
	}
	nsteps := len(nm.stepList)
	total := &stepAcc{lat: newLatAcc(), first: math.MaxInt64, last: math.MinInt64}
	allClients := make(map[uint64]struct{})
	type stepOut struct {
		s     StepStats
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
		s := StepStats{Step: nm.stepList[id], Clients: int64(len(acc.clients)), Rooms: int64(len(rooms))}
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
	res.Overall = StepStats{Step: "all", Clients: int64(len(allClients))}
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
func stepRooms(nm *names, partitions []*partition, srs []int) []RoomStats {
	var rooms []RoomStats
	for _, sr := range srs {
		r := RoomStats{Room: nm.srList[sr].room}
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
func series(nm *names, partitions []*partition, steps []StepStats, interval time.Duration) []SeriesPoint {
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
	var out []SeriesPoint
	for k, a := range merged {
		name := nm.stepList[k.step]
		if _, ok := order[name]; !ok {
			continue
		}
		out = append(out, SeriesPoint{
			Step: name, UnixUS: k.idx * interval.Microseconds(), Sent: a.sent, Deliveries: a.recv,
			PerSecond: float64(a.recv) / sec, P50Ms: ms(a.hist.quantile(.5)), P99Ms: ms(a.hist.quantile(.99)),
		})
	}
	slices.SortFunc(out, func(a, b SeriesPoint) int {
		return cmp.Or(cmp.Compare(order[a.Step], order[b.Step]), cmp.Compare(a.UnixUS, b.UnixUS))
	})
	return out
}

func fillCounts(s *StepStats, a *stepAcc) {
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
func hottest(rooms []RoomStats, n int) ([]RoomStats, float64) {
	if len(rooms) == 0 {
		return nil, 0
	}
	var sum int64
	for _, r := range rooms {
		sum += r.Expected
	}
	slices.SortStableFunc(rooms, func(a, b RoomStats) int {
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
