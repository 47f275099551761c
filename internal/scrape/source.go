package scrape

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/scalechat/scalechat/internal/procstat"
)

// Source gathers the metrics of one node.
type Source struct {
	Node   string // how the node is named on the dashboard and in the server CSV
	Gather func(ctx context.Context) ([]*dto.MetricFamily, error)
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

// PIDSource reads a local process's CPU time and resident memory from
// /proc/PID/stat, as process_cpu_seconds_total and
// process_resident_memory_bytes, for a server whose /metrics is not
// scraped (or that has none). The node is named "pid:PID". /proc counts CPU
// time in ticks of 10 ms.
func PIDSource(pid int) Source {
	return Source{Node: "pid:" + strconv.Itoa(pid), Gather: func(context.Context) ([]*dto.MetricFamily, error) {
		st, err := procstat.Read(pid)
		if err != nil {
			return nil, fmt.Errorf("read process %d: %w", pid, err)
		}
		return []*dto.MetricFamily{
			family("process_cpu_seconds_total", dto.MetricType_COUNTER, st.CPU.Seconds()),
			family("process_resident_memory_bytes", dto.MetricType_GAUGE, float64(st.RSS)),
		}, nil
	}}
}

// family is a metric family of one unlabelled counter or gauge.
func family(name string, kind dto.MetricType, v float64) *dto.MetricFamily {
	m := &dto.Metric{}
	if kind == dto.MetricType_COUNTER {
		m.Counter = &dto.Counter{Value: &v}
	} else {
		m.Gauge = &dto.Gauge{Value: &v}
	}
	return &dto.MetricFamily{Name: &name, Type: &kind, Metric: []*dto.Metric{m}}
}

// limitedReader is io.LimitReader that fails, instead of ending quietly,
// past its limit: a truncated exposition would parse as a wrong one.
type limitedReader struct {
	r io.Reader
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

// Snapshot gathers the node's metrics and returns their snapshot, timed
// when the figures arrived.
func (s Source) Snapshot(ctx context.Context) (Snapshot, error) {
	families, err := s.Gather(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	return SnapshotOf(families, time.Now()), nil
}
