//go:build linux

package metrics

import (
	"context"
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/scalechat/scalechat/internal/scrape"
)

// Number is a float64 that encodes as JSON null when it is not a number
// (a figure that is unknown, or undefined such as a percentile of nothing).
type Number float64

// MarshalJSON implements json.Marshaler.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// Sample is one node's figures over one interval, as the dashboard shows
// them: gauges at the end of the interval, rates over it.
type Sample struct {
	UnixMS      int64  `json:"t"` // end of the interval, milliseconds since the Unix epoch
	Connections Number `json:"connections"`
	Rooms       Number `json:"rooms"`
	InPerSec    Number `json:"in_per_s"`    // messages received from clients
	OutPerSec   Number `json:"out_per_s"`   // deliveries to clients
	DropsPerSec Number `json:"drops_per_s"` // every drop reason
	P50MS       Number `json:"p50_ms"`      // processing time percentiles over the interval; null without messages
	P99MS       Number `json:"p99_ms"`
	CPU         Number `json:"cpu"` // CPU seconds per second: 1 is one core busy
	RSSBytes    Number `json:"rss_bytes"`
}

// SampleBetween returns the figures of the interval from prev to cur, two
// snapshots of the same node.
func SampleBetween(prev, cur scrape.Snapshot) Sample {
	s := Sample{
		UnixMS:      cur.Time.UnixMilli(),
		Connections: Number(cur.Connections),
		Rooms:       Number(cur.Rooms),
		RSSBytes:    Number(cur.RSSBytes),
		InPerSec:    Number(math.NaN()),
		OutPerSec:   Number(math.NaN()),
		DropsPerSec: Number(math.NaN()),
		P50MS:       Number(math.NaN()),
		P99MS:       Number(math.NaN()),
		CPU:         Number(math.NaN()),
	}
	dt := cur.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		return s
	}
	rate := func(a, b float64) Number {
		if b < a { // a counter went back: the server restarted
			return Number(math.NaN())
		}
		return Number((b - a) / dt) // NaN stays NaN
	}
	s.InPerSec = rate(prev.MessagesIn, cur.MessagesIn)
	s.OutPerSec = rate(prev.Deliveries, cur.Deliveries)
	s.DropsPerSec = rate(prev.Dropped, cur.Dropped)
	s.CPU = rate(prev.CPUSeconds, cur.CPUSeconds)
	if d, ok := cur.Processing.Since(prev.Processing); ok {
		s.P50MS = Number(d.Quantile(0.50) * 1000)
		s.P99MS = Number(d.Quantile(0.99) * 1000)
	}
	return s
}

// GathererSource reads a node's metrics from a registry in this process.
func GathererSource(node string, g prometheus.Gatherer) scrape.Source {
	return scrape.Source{Node: node, Gather: func(context.Context) ([]*dto.MetricFamily, error) { return g.Gather() }}
}
