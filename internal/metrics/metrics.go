//go:build linux

package metrics

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scalechat/scalechat/internal/scrape"
	"github.com/scalechat/scalechat/internal/server"
)

//go:embed dashboard.html
var dashboardHTML []byte

// Options configure a node's metrics endpoint.
type Options struct {
	Node     string        // the node's name on the dashboard, e.g. its chat address
	Interval time.Duration // dashboard sampling interval; 0 means one second
	Keep     time.Duration // dashboard history; 0 means ten minutes
	Logger   *slog.Logger
}

// Metrics serves a node's metrics: /metrics for Prometheus and the live
// dashboard at /dashboard.
type Metrics struct {
	reg  *prometheus.Registry
	feed *Feed
	log  *slog.Logger
}

// New returns the metrics of srv, plus the Go runtime's and the process's.
func New(srv *server.Server, opts Options) *Metrics {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Keep <= 0 {
		opts.Keep = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(srv),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if _, on := srv.WebhookStats(); on {
		reg.MustRegister(newWebhookCollector(srv))
	}
	feed := NewFeed([]scrape.Source{GathererSource(opts.Node, reg)}, opts.Interval, opts.Keep, opts.Logger)
	if _, cluster := srv.BrokerStats(); cluster {
		// Every node of the cluster on the dashboard: the nodes announce
		// their metrics URL through the broker.
		client := &http.Client{Timeout: opts.Interval}
		feed.Discover(func(ctx context.Context) ([]scrape.Source, error) {
			nodes, err := srv.ClusterNodes(ctx)
			if err != nil {
				return nil, err
			}
			var sources []scrape.Source
			for name, url := range nodes {
				src := scrape.URLSource(url, client)
				src.Node = name
				sources = append(sources, src)
			}
			return sources, nil
		})
	}
	return &Metrics{reg: reg, feed: feed, log: opts.Logger}
}

// Gatherer returns the registry behind /metrics.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Handler returns the HTTP handler of the metrics listener.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		MaxRequestsInFlight: 8,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /dashboard", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(dashboardHTML)
	})
	mux.Handle("GET /dashboard/feed", m.feed)
	// Profiles for operators, on the same internal listener as the metrics.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/dashboard", http.StatusFound)
	})
	return mux
}

// Serve serves the metrics on ln, and samples the dashboard's figures,
// until ctx is done.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           m.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
		// Dashboards' event streams end with ctx: Shutdown does not wait
		// for them.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before wg.Wait: stops the feed when the listener fails
	wg.Go(func() { m.feed.Run(ctx) })
	errc := make(chan error, 1)
	wg.Go(func() { errc <- hs.Serve(ln) })
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
		return fmt.Errorf("metrics server shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}
