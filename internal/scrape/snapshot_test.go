package scrape

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

func TestQuantile(t *testing.T) {
	b := Buckets{Bounds: []float64{1, 2, 4}, Cumulative: []float64{10, 30, 40}, Count: 50}
	tests := []struct {
		name string
		b    Buckets
		q    float64
		want float64
	}{
		{"first bucket interpolates from 0", b, 0.1, 0.5},
		{"bucket edge", b, 0.2, 1},
		{"middle bucket", b, 0.4, 1.5},
		{"third bucket", b, 0.7, 3},
		{"beyond the last bound gives it", b, 0.99, 4},
		{"max", b, 1, 4},
		{"zero", b, 0, 0},
		{"empty buckets skipped", Buckets{Bounds: []float64{1, 2, 4}, Cumulative: []float64{0, 0, 10}, Count: 10}, 0.5, 3},
		{"no observations", Buckets{Bounds: []float64{1}, Cumulative: []float64{0}}, 0.5, math.NaN()},
		{"no buckets", Buckets{Count: 3}, 0.5, math.NaN()},
		{"q out of range", b, 1.5, math.NaN()},
	}
	for _, tt := range tests {
		got := tt.b.Quantile(tt.q)
		if got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)) {
			t.Errorf("%s: Quantile(%g) = %g, want %g", tt.name, tt.q, got, tt.want)
		}
	}
}

func TestBucketsSince(t *testing.T) {
	prev := Buckets{Bounds: []float64{1, 2}, Cumulative: []float64{1, 3}, Count: 4}
	cur := Buckets{Bounds: []float64{1, 2}, Cumulative: []float64{5, 8}, Count: 10}
	d, ok := cur.Since(prev)
	if !ok || d.Count != 6 || d.Cumulative[0] != 4 || d.Cumulative[1] != 5 {
		t.Errorf("Since = %+v, %v", d, ok)
	}
	tests := []struct {
		name string
		prev Buckets
	}{
		{"restarted", Buckets{Bounds: []float64{1, 2}, Cumulative: []float64{1, 3}, Count: 40}},
		{"bucket went back", Buckets{Bounds: []float64{1, 2}, Cumulative: []float64{6, 6}, Count: 6}},
		{"other bounds", Buckets{Bounds: []float64{1, 3}, Cumulative: []float64{1, 3}, Count: 4}},
		{"fewer bounds", Buckets{Bounds: []float64{1}, Cumulative: []float64{1}, Count: 4}},
	}
	for _, tt := range tests {
		if _, ok := cur.Since(tt.prev); ok {
			t.Errorf("%s: Since accepted it", tt.name)
		}
	}
}

const exposition = `# HELP process_cpu_seconds_total x
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.048576e+07
# TYPE scalechat_connections gauge
scalechat_connections 42
# TYPE scalechat_rooms gauge
scalechat_rooms 3
# TYPE scalechat_messages_received_total counter
scalechat_messages_received_total 1000
# TYPE scalechat_messages_delivered_total counter
scalechat_messages_delivered_total 20000
# TYPE scalechat_messages_dropped_total counter
scalechat_messages_dropped_total{reason="invalid"} 2
scalechat_messages_dropped_total{reason="rate_limit"} 5
# TYPE scalechat_message_processing_seconds histogram
scalechat_message_processing_seconds_bucket{le="0.001"} 100
scalechat_message_processing_seconds_bucket{le="0.002"} 300
scalechat_message_processing_seconds_bucket{le="+Inf"} 400
scalechat_message_processing_seconds_sum 0.6
scalechat_message_processing_seconds_count 400
`

func TestSnapshotOf(t *testing.T) {
	families, err := ParseText(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(100, 0)
	s := SnapshotOf(families, at)
	want := Snapshot{Time: at, CPUSeconds: 12.5, RSSBytes: 10485760, Connections: 42, Rooms: 3, MessagesIn: 1000,
		Deliveries: 20000, Dropped: 7}
	if s.Time != want.Time || s.CPUSeconds != want.CPUSeconds || s.RSSBytes != want.RSSBytes ||
		s.Connections != want.Connections || s.Rooms != want.Rooms || s.MessagesIn != want.MessagesIn ||
		s.Deliveries != want.Deliveries || s.Dropped != want.Dropped {
		t.Errorf("got %+v", s)
	}
	p := s.Processing
	if len(p.Bounds) != 2 || p.Bounds[1] != 0.002 || p.Cumulative[0] != 100 || p.Cumulative[1] != 300 || p.Count != 400 {
		t.Errorf("processing %+v", p)
	}
	// A scrape without scalechat's figures leaves them unknown.
	empty := SnapshotOf(nil, at)
	if !math.IsNaN(empty.Connections) || !math.IsNaN(empty.CPUSeconds) || empty.Processing.Count != 0 {
		t.Errorf("empty snapshot %+v", empty)
	}
	if _, err := ParseText(strings.NewReader("scalechat_connections{ 1\n")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestAppendServerCSVRow(t *testing.T) {
	prev := Snapshot{Time: time.UnixMicro(1763719200000000),
		Processing: Buckets{Bounds: []float64{0.001, 0.002}, Cumulative: []float64{10, 10}, Count: 10}}
	cur := Snapshot{Time: time.UnixMicro(1763719201000123), CPUSeconds: 12.34, RSSBytes: 10485760, Connections: 200,
		MessagesIn: 6000, Deliveries: 120000,
		Processing: Buckets{Bounds: []float64{0.001, 0.002}, Cumulative: []float64{60, 110}, Count: 110}}
	tests := []struct {
		name string
		node string
		prev *Snapshot
		cur  Snapshot
		want string
	}{
		{"with a previous scrape", "http://127.0.0.1:8081/metrics", &prev, cur,
			"1763719201000123,http://127.0.0.1:8081/metrics,12.34,10485760,200,6000,120000,1.000,1.980\n"},
		{"first scrape: no percentiles", "http://n/metrics", nil, cur,
			"1763719201000123,http://n/metrics,12.34,10485760,200,6000,120000,,\n"},
		{"no message in between", "http://n/metrics", &cur, cur,
			"1763719201000123,http://n/metrics,12.34,10485760,200,6000,120000,,\n"},
		{"a comma in the URL is quoted", `http://n/metrics?a=1,2`, nil, cur,
			`1763719201000123,"http://n/metrics?a=1,2",12.34,10485760,200,6000,120000,,` + "\n"},
		{"unknown figures are empty", "n", nil, SnapshotOf(nil, cur.Time), "1763719201000123,n,,,,,,,\n"},
	}
	for _, tt := range tests {
		if got := string(AppendServerCSVRow(nil, tt.node, tt.prev, tt.cur)); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
	if n := strings.Count(results.ServerHeader, ",") + 1; n != 9 {
		t.Errorf("header has %d columns", n)
	}
}
