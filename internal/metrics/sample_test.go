//go:build linux

package metrics

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/scrape"
)

func TestSampleBetween(t *testing.T) {
	prev := scrape.Snapshot{Time: time.Unix(100, 0), CPUSeconds: 10, RSSBytes: 1, Connections: 1, Rooms: 1,
		MessagesIn: 100, Deliveries: 1000, Dropped: 0,
		Processing: scrape.Buckets{Bounds: []float64{0.001, 0.002}, Cumulative: []float64{0, 0}}}
	cur := scrape.Snapshot{Time: time.Unix(102, 0), CPUSeconds: 11, RSSBytes: 2048, Connections: 5, Rooms: 2,
		MessagesIn: 300, Deliveries: 5000, Dropped: 4,
		Processing: scrape.Buckets{Bounds: []float64{0.001, 0.002}, Cumulative: []float64{50, 100}, Count: 100}}
	s := SampleBetween(prev, cur)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"t":102000,"connections":5,"rooms":2,"in_per_s":100,"out_per_s":2000,"drops_per_s":2,"p50_ms":1,"p99_ms":1.98,"cpu":0.5,"rss_bytes":2048}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	// A restart (counters back), no messages and unknown figures give nulls.
	restarted := cur
	restarted.MessagesIn, restarted.CPUSeconds, restarted.RSSBytes = 1, math.NaN(), math.NaN()
	restarted.Processing = prev.Processing
	b, _ = json.Marshal(SampleBetween(cur, restarted))
	for _, k := range []string{`"in_per_s":null`, `"p50_ms":null`, `"p99_ms":null`, `"cpu":null`, `"rss_bytes":null`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s lacks %s", b, k)
		}
	}
}
