package scrape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// Scraper reads the /metrics of one or more servers every interval during a
// load test and writes one <out>.server.csv row per server per scrape.
type Scraper struct {
	URLs     []string      // the servers' /metrics URLs; each names its node in the CSV
	PIDs     []int         // local server processes read from /proc (PIDSource), named "pid:PID"
	Interval time.Duration // 0 means one second
	Client   *http.Client  // nil means one with a timeout of Interval
	Logger   *slog.Logger  // nil means no logs
}

// Summary says how a scraping run went.
type Summary struct {
	Rows   int // rows written
	Failed int // scrapes that failed (server unreachable, bad answer); they leave no row
}

// CheckURL returns an error, in one sentence for the user, when u
// cannot be a server's /metrics URL.
func CheckURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("server metrics URL %q is not an http:// or https:// URL such as http://127.0.0.1:8081/metrics", u)
	}
	return nil
}

// Run scrapes every URL each interval, all at once, until ctx is done, then
// once more, and writes the header and the rows to w, flushing after every
// round so that a run cut short keeps what it scraped. A failed scrape is counted and logged
// (once until that server answers again), not returned: the load test goes
// on. Run returns the first error writing w.
//
// processing_p50_ms and processing_p99_ms are the percentiles of the
// messages processed since the node's previous row, from the difference of
// the two histograms; they are empty on a node's first row, after a failed
// scrape, and when no message was processed in between.
func (s *Scraper) Run(ctx context.Context, w io.Writer) (Summary, error) {
	var sum Summary
	for _, u := range s.URLs {
		if err := CheckURL(u); err != nil {
			return sum, err
		}
	}
	interval := s.Interval
	if interval <= 0 {
		interval = time.Second
	}
	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: interval}
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sources := make([]Source, 0, len(s.URLs)+len(s.PIDs))
	for _, u := range s.URLs {
		sources = append(sources, URLSource(u, client))
	}
	for _, pid := range s.PIDs {
		sources = append(sources, PIDSource(pid))
	}
	prev := make([]*Snapshot, len(sources))
	failing := make([]bool, len(sources))

	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(results.ServerHeader + "\n"); err != nil {
		return sum, fmt.Errorf("write server metrics: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("write server metrics: %w", err)
	}
	var row []byte
	// round scrapes every URL at once and writes their rows. Its context is
	// not ctx: a round under way when ctx ends completes, so that no
	// scrape fails for being cut short.
	round := func() error {
		rctx, cancel := context.WithTimeout(context.Background(), interval)
		defer cancel()
		snaps := make([]Snapshot, len(sources))
		errs := make([]error, len(sources))
		var wg sync.WaitGroup
		for i, src := range sources {
			wg.Go(func() { snaps[i], errs[i] = src.Snapshot(rctx) })
		}
		wg.Wait()
		for i := range sources {
			if errs[i] != nil {
				sum.Failed++
				if !failing[i] {
					log.Warn("cannot scrape server metrics", "node", sources[i].Node, "err", errs[i])
				}
				failing[i], prev[i] = true, nil
				continue
			}
			if failing[i] {
				log.Info("scraping server metrics again", "node", sources[i].Node)
			}
			failing[i] = false
			row = AppendServerCSVRow(row[:0], sources[i].Node, prev[i], snaps[i])
			if _, err := bw.Write(row); err != nil {
				return fmt.Errorf("write server metrics: %w", err)
			}
			sum.Rows++
			prev[i] = &snaps[i]
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("write server metrics: %w", err)
		}
		return nil
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := round(); err != nil {
			return sum, err
		}
		select {
		case <-ctx.Done():
			// One last round: the file ends with the servers' figures after
			// the run.
			return sum, round()
		case <-t.C:
		}
	}
}

// AppendServerCSVRow appends the server.csv row of cur, a snapshot of node,
// to dst. prev is the node's previous snapshot (nil for none), from which
// the processing time percentiles are computed. Figures the scrape lacked
// are left empty.
func AppendServerCSVRow(dst []byte, node string, prev *Snapshot, cur Snapshot) []byte {
	dst = strconv.AppendInt(dst, cur.Time.UnixMicro(), 10)
	dst = append(dst, ',')
	dst = appendCSVField(dst, node)
	dst = append(dst, ',')
	dst = appendFloat(dst, cur.CPUSeconds, -1)
	for _, v := range []float64{cur.RSSBytes, cur.Connections, cur.MessagesIn, cur.Deliveries} {
		dst = append(dst, ',')
		dst = appendFloat(dst, v, 0)
	}
	p50, p99 := math.NaN(), math.NaN()
	if prev != nil {
		if d, ok := cur.Processing.Since(prev.Processing); ok {
			p50, p99 = d.Quantile(0.50)*1000, d.Quantile(0.99)*1000
		}
	}
	dst = append(dst, ',')
	dst = appendFloat(dst, p50, 3)
	dst = append(dst, ',')
	dst = appendFloat(dst, p99, 3)
	return append(dst, '\n')
}

// appendFloat appends v with prec decimals (-1: as few as exact), or
// nothing when v is not a number.
func appendFloat(dst []byte, v float64, prec int) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return dst
	}
	return strconv.AppendFloat(dst, v, 'f', prec, 64)
}

// appendCSVField appends s, quoted when it holds a comma, quote or line
// break (a URL may hold a comma).
func appendCSVField(dst []byte, s string) []byte {
	quote := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ',' || c == '"' || c == '\n' || c == '\r' {
			quote = true
			break
		}
	}
	if !quote {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}

// RecordServerCSV scrapes urls, and reads the processes pids from /proc,
// every second into the file at path (created or truncated) until ctx is
// done: what `scalechat loadtest --server-metrics` and `--server-pid` do
// beside <out>.csv.
func RecordServerCSV(ctx context.Context, path string, urls []string, pids []int, log *slog.Logger) (Summary, error) {
	for _, u := range urls {
		if err := CheckURL(u); err != nil {
			return Summary{}, err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return Summary{}, fmt.Errorf("create server metrics file: %w", err)
	}
	sc := &Scraper{URLs: urls, PIDs: pids, Logger: log}
	sum, err := sc.Run(ctx, f)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close server metrics file: %w", cerr)
	}
	return sum, err
}
