package scrape

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// fakeNode serves an exposition whose counters grow by known steps at each
// scrape: scrape k (from 1) shows k*100 messages in, k*1000 deliveries,
// k CPU seconds, and k*10 observations of 1.5 ms.
type fakeNode struct {
	scrapes  atomic.Int64
	failAt   map[int64]bool // scrapes answered with HTTP 500
	onScrape func(k int64)
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	k := f.scrapes.Add(1)
	if f.onScrape != nil {
		f.onScrape(k)
	}
	if f.failAt[k] {
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, `# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total %d
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes %d
# TYPE scalechat_connections gauge
scalechat_connections 7
# TYPE scalechat_messages_received_total counter
scalechat_messages_received_total %d
# TYPE scalechat_messages_delivered_total counter
scalechat_messages_delivered_total %d
# TYPE scalechat_message_processing_seconds histogram
scalechat_message_processing_seconds_bucket{le="0.001"} 0
scalechat_message_processing_seconds_bucket{le="0.002"} %d
scalechat_message_processing_seconds_bucket{le="+Inf"} %d
scalechat_message_processing_seconds_sum 1
scalechat_message_processing_seconds_count %d
`, k, 1000000+k, k*100, k*1000, k*10, k*10, k*10)
}

func TestScraperWritesServerCSV(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const rounds = 5 // then one more after the cancel
	a := &fakeNode{onScrape: func(k int64) {
		if k == rounds {
			cancel() // this round completes
		}
	}}
	b := &fakeNode{failAt: map[int64]bool{3: true}}
	down := httptest.NewServer(http.NotFoundHandler())
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()
	defer down.Close()
	urls := []string{sa.URL + "/metrics", sb.URL + "/metrics", down.URL + "/metrics"}

	var out testsupport.SyncBuffer
	sc := &Scraper{URLs: urls, Interval: 20 * time.Millisecond}
	start := time.Now()
	sum, err := sc.Run(ctx, &out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != results.ServerHeader {
		t.Fatalf("header %v", rows[0])
	}
	rows = rows[1:]
	// a: every round; b: every round but its third; down: never.
	if sum.Rows != 2*(rounds+1)-1 || len(rows) != sum.Rows || sum.Failed != rounds+2 {
		t.Fatalf("summary %+v, %d rows:\n%s", sum, len(rows), out.String())
	}
	var got []string
	var last int64
	for _, r := range rows {
		us, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil || us < start.UnixMicro() || us > time.Now().UnixMicro() {
			t.Errorf("unix_us %q out of the run", r[0])
		}
		if r[1] == urls[0] {
			if us <= last {
				t.Errorf("unix_us %d not after %d", us, last)
			}
			last = us
		}
		node := map[string]string{urls[0]: "a", urls[1]: "b"}[r[1]]
		got = append(got, node+","+strings.Join(r[2:], ","))
	}
	want := []string{
		// First rows have no percentiles: there is nothing to compare with.
		"a,1,1000001,7,100,1000,,",
		"b,1,1000001,7,100,1000,,",
		// Each second 10 observations between 1 and 2 ms: p50 1.5, p99 1.99.
		"a,2,1000002,7,200,2000,1.500,1.990",
		"b,2,1000002,7,200,2000,1.500,1.990",
		"a,3,1000003,7,300,3000,1.500,1.990",
		// b failed its third scrape: its next row starts afresh.
		"a,4,1000004,7,400,4000,1.500,1.990",
		"b,4,1000004,7,400,4000,,",
		"a,5,1000005,7,500,5000,1.500,1.990",
		"b,5,1000005,7,500,5000,1.500,1.990",
		// The last round, after the cancel.
		"a,6,1000006,7,600,6000,1.500,1.990",
		"b,6,1000006,7,600,6000,1.500,1.990",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The reader of the format takes every row, those without percentiles
	// too.
	p := filepath.Join(t.TempDir(), "server.csv")
	if err := os.WriteFile(p, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	read, bad, err := results.ReadServer(p)
	if err != nil || bad != 0 || len(read) != len(want) || read[len(read)-1].Deliveries != 6000 {
		t.Errorf("results.ReadServer: %d rows (want %d), %d malformed, %v", len(read), len(want), bad, err)
	}
}

func TestScraperRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8081/metrics", "ftp://x/metrics", "http:///metrics", "http://[::1/metrics"} {
		sc := &Scraper{URLs: []string{u}}
		if _, err := sc.Run(context.Background(), &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", u)
		}
		if _, err := RecordServerCSV(context.Background(), filepath.Join(t.TempDir(), "x.server.csv"), []string{u}, nil, nil); err == nil {
			t.Errorf("RecordServerCSV accepted %q", u)
		}
	}
}

func TestRecordServerCSV(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := &fakeNode{onScrape: func(k int64) {
		if k == 1 {
			cancel()
		}
	}}
	s := httptest.NewServer(n)
	defer s.Close()
	path := filepath.Join(t.TempDir(), "run.server.csv")
	sum, err := RecordServerCSV(ctx, path, []string{s.URL + "/metrics"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if sum.Rows != 2 || len(lines) != 3 || lines[0] != results.ServerHeader {
		t.Errorf("summary %+v, file:\n%s", sum, b)
	}
	if _, err := RecordServerCSV(context.Background(), filepath.Join(t.TempDir(), "no", "such", "dir.csv"), []string{s.URL}, nil, nil); err == nil {
		t.Error("an uncreatable file gave no error")
	}
}

// A server answering something else than metrics, or too much, is a failed
// scrape, not a crash or a wrong row.
func TestScraperSurvivesBadAnswers(t *testing.T) {
	handlers := map[string]http.HandlerFunc{
		"garbage": func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>not metrics{\n")) },
		"huge": func(w http.ResponseWriter, _ *http.Request) {
			line := []byte("# HELP x " + strings.Repeat("y", 1<<16) + "\n")
			for range maxScrapeBytes/len(line) + 2 {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		},
		"slow": func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
	}
	for name, h := range handlers {
		t.Run(name, func(t *testing.T) {
			s := httptest.NewServer(h)
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			sc := &Scraper{URLs: []string{s.URL}, Interval: 50 * time.Millisecond}
			var out bytes.Buffer
			sum, err := sc.Run(ctx, &out)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Rows != 0 || sum.Failed == 0 || out.String() != results.ServerHeader+"\n" {
				t.Errorf("summary %+v, output %q", sum, out.String())
			}
		})
	}
}
