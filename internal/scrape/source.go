package scrape

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
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
