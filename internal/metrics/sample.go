package metrics

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
func SampleBetween(prev, cur Snapshot) Sample {
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

// Source gathers the metrics of one node.
type Source struct {
	Node   string // how the node is named on the dashboard and in the server CSV
	Gather func(ctx context.Context) ([]*dto.MetricFamily, error)
}

// GathererSource reads a node's metrics from a registry in this process.
func GathererSource(node string, g prometheus.Gatherer) Source {
	return Source{Node: node, Gather: func(context.Context) ([]*dto.MetricFamily, error) { return g.Gather() }}
}

// maxScrapeBytes bounds what a scrape reads: a scalechat node exposes about
// 20 KiB; anything far larger is not one.
const maxScrapeBytes = 16 << 20

// URLSource scrapes a node's /metrics URL over HTTP. The node is named by
// its URL.
func URLSource(url string, client *http.Client) Source {
	if client == nil {
		client = http.DefaultClient
	}
	return Source{Node: url, Gather: func(ctx context.Context) ([]*dto.MetricFamily, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", url, err)
		}
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", url, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("scrape %s: HTTP status %s", url, resp.Status)
		}
		families, err := ParseText(&limitedReader{r: resp.Body, n: maxScrapeBytes})
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", url, err)
		}
		return families, nil
	}}
}

// limitedReader is io.LimitReader that fails, instead of ending quietly,
// past its limit: a truncated exposition would parse as a wrong one.
type limitedReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("response larger than %d bytes", maxScrapeBytes)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// snapshotOf gathers src and returns its snapshot, timed when the figures
// arrived.
func snapshotOf(ctx context.Context, src Source) (Snapshot, error) {
	families, err := src.Gather(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	return SnapshotOf(families, time.Now()), nil
}
