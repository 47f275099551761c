package scrape

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Snapshot is what the dashboard and the load test's server CSV need of one
// scrape of a node's metrics: counters and gauges as read, at Time.
// A metric the scrape did not hold is NaN.
type Snapshot struct {
	Time        time.Time
	CPUSeconds  float64 // process_cpu_seconds_total
	RSSBytes    float64 // process_resident_memory_bytes
	Connections float64
	Rooms       float64
	MessagesIn  float64 // scalechat_messages_received_total
	Deliveries  float64 // scalechat_messages_delivered_total
	Dropped     float64 // scalechat_messages_dropped_total, every reason
	Processing  Buckets // scalechat_message_processing_seconds
}

// Buckets is a cumulative histogram as Prometheus exposes it.
type Buckets struct {
	Bounds     []float64 // upper bounds, increasing, +Inf excluded
	Cumulative []float64 // observations ≤ each bound
	Count      float64   // every observation, those above the last bound included
}

// SnapshotOf picks the Snapshot's values out of gathered metric families.
func SnapshotOf(families []*dto.MetricFamily, at time.Time) Snapshot {
	s := Snapshot{
		Time:        at,
		CPUSeconds:  math.NaN(),
		RSSBytes:    math.NaN(),
		Connections: math.NaN(),
		Rooms:       math.NaN(),
		MessagesIn:  math.NaN(),
		Deliveries:  math.NaN(),
		Dropped:     math.NaN(),
	}
	for _, f := range families {
		switch f.GetName() {
		case "process_cpu_seconds_total":
			s.CPUSeconds = sumOf(f)
		case "process_resident_memory_bytes":
			s.RSSBytes = sumOf(f)
		case NameConnections:
			s.Connections = sumOf(f)
		case NameRooms:
			s.Rooms = sumOf(f)
		case NameMessagesIn:
			s.MessagesIn = sumOf(f)
		case NameDeliveries:
			s.Deliveries = sumOf(f)
		case NameDropped:
			s.Dropped = sumOf(f)
		case NameProcessing:
			s.Processing = bucketsOf(f)
		}
	}
	return s
}

// ParseText reads metrics in the Prometheus text exposition format.
func ParseText(r io.Reader) ([]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	families := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		families = append(families, f)
	}
	sort.Slice(families, func(i, j int) bool { return families[i].GetName() < families[j].GetName() })
	return families, nil
}

// sumOf adds up every series of a counter, gauge or untyped family.
func sumOf(f *dto.MetricFamily) float64 {
	var v float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Untyped != nil:
			v += m.Untyped.GetValue()
		}
	}
	return v
}

// bucketsOf merges the series of a histogram family (normally one).
func bucketsOf(f *dto.MetricFamily) Buckets {
	var b Buckets
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		if b.Bounds == nil {
			for _, bk := range h.GetBucket() {
				if math.IsInf(bk.GetUpperBound(), +1) {
					continue
				}
				b.Bounds = append(b.Bounds, bk.GetUpperBound())
			}
			b.Cumulative = make([]float64, len(b.Bounds))
		}
		for _, bk := range h.GetBucket() {
			if i := sort.SearchFloat64s(b.Bounds, bk.GetUpperBound()); i < len(b.Bounds) && b.Bounds[i] == bk.GetUpperBound() {
				b.Cumulative[i] += float64(bk.GetCumulativeCount())
			}
		}
		b.Count += float64(h.GetSampleCount())
	}
	return b
}

// Since returns the observations made between prev and b, when both have the
// same buckets; ok is false otherwise (the server restarted or changed).
func (b Buckets) Since(prev Buckets) (d Buckets, ok bool) {
	if len(prev.Bounds) != len(b.Bounds) || prev.Count > b.Count {
		return Buckets{}, false
	}
	d = Buckets{Bounds: b.Bounds, Cumulative: make([]float64, len(b.Bounds)), Count: b.Count - prev.Count}
	for i := range b.Bounds {
		if prev.Bounds[i] != b.Bounds[i] || prev.Cumulative[i] > b.Cumulative[i] {
			return Buckets{}, false
		}
		d.Cumulative[i] = b.Cumulative[i] - prev.Cumulative[i]
	}
	return d, true
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) of the observations the way
// PromQL's histogram_quantile does: it finds the bucket holding the rank and
// interpolates linearly within it (from 0 in the first bucket). A rank beyond
// the last bound gives that bound. Without observations it returns NaN.
func (b Buckets) Quantile(q float64) float64 {
	if b.Count <= 0 || len(b.Bounds) == 0 || q < 0 || q > 1 || math.IsNaN(q) {
		return math.NaN()
	}
	rank := q * b.Count
	i := sort.Search(len(b.Cumulative), func(i int) bool { return b.Cumulative[i] >= rank })
	if i == len(b.Bounds) {
		return b.Bounds[len(b.Bounds)-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = b.Bounds[i-1], b.Cumulative[i-1]
	}
	in := b.Cumulative[i] - below
	if in <= 0 {
		return b.Bounds[i]
	}
	return lower + (b.Bounds[i]-lower)*(rank-below)/in
}
