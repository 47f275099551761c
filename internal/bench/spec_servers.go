//go:build linux

package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/launch"
	"github.com/scalechat/scalechat/internal/loadtest"
)

// specSetups are a benchmark's servers as its steps start them: the
// file's servers (setup "") and its named setups (bench: setups), each
// started at its first step and stopped after its last, or, when fresh,
// started for each group of steps and stopped after it: no idle server
// shares the CPUs with the steps of another setup.
type specSetups struct {
	r    *runner
	sp   *spec
	live map[string]*setupProcs
}

// setupProcs are one setup's running servers.
type setupProcs struct {
	cfg    specServers
	cl     clusterProcs
	meters []string // the one serve's /metrics URL (bytes_per_delivery, scrape); none for a cluster
}

func newSpecSetups(r *runner, sp *spec) *specSetups {
	return &specSetups{r: r, sp: sp, live: map[string]*setupProcs{}}
}

// config is a setup's servers by name ("": the file's own).
func (s *specSetups) config(name string) specServers { return s.sp.setup(name) }

// setupOf is the name of the setup a step runs against.
func (sp *spec) setupOf(st loadtest.Step) string { return sp.stepBench[st.Name].Servers }

// forGroup returns the servers of each of steps (run at once), starting
// those not running yet and the fresh ones anew, each setup once.
func (s *specSetups) forGroup(ctx context.Context, steps []loadtest.Step) ([]*setupProcs, error) {
	out := make([]*setupProcs, len(steps))
	started := map[string]bool{}
	for i, st := range steps {
		name := s.sp.setupOf(st)
		p := s.live[name]
		if p == nil || (p.cfg.Fresh && !started[name]) {
			var err error
			if p, err = s.start(ctx, name, st); err != nil {
				return nil, err
			}
			started[name] = true
		}
		out[i] = p
	}
	return out, nil
}

// start starts a setup's servers (a cluster's nodes as many as step
// uses) and lets them settle before their idle RSS is read; a fresh
// setup's logs are named after the step too.
func (s *specSetups) start(ctx context.Context, name string, step loadtest.Step) (*setupProcs, error) {
	if old := s.live[name]; old != nil {
		old.cl.stop()
	}
	cfg := s.config(name)
	prefix := s.sp.fileTag()
	if name != "" {
		prefix += "-" + name
	}
	if cfg.Fresh {
		prefix += "-" + step.Name
	}
	p := &setupProcs{cfg: cfg, cl: clusterProcs{prefix: safeName(prefix), extra: cfg.Flags, nats: cfg.Engine == specEngineNATS}}
	s.live[name] = p
	meters, err := s.r.startSpecServers(ctx, cfg, &p.cl, s.sp.stepNodes(step))
	if err != nil {
		return nil, err
	}
	p.meters = meters
	time.Sleep(300 * time.Millisecond)
	return p, nil
}

// endGroup stops, after a group of steps, the fresh setups and those no
// step of rest (the steps still to run) uses.
func (s *specSetups) endGroup(rest []loadtest.Step) {
	for name, p := range s.live {
		used := slices.ContainsFunc(rest, func(st loadtest.Step) bool { return s.sp.setupOf(st) == name })
		if p.cfg.Fresh || !used {
			p.cl.stop()
			delete(s.live, name)
		}
	}
}

// alive returns an error when a running server has exited.
func (s *specSetups) alive() error {
	for _, p := range s.live {
		for _, q := range p.cl.all() {
			if err := q.alive(); err != nil {
				return err
			}
		}
	}
	return nil
}

// stop stops every setup's servers.
func (s *specSetups) stop() {
	for name, p := range s.live {
		p.cl.stop()
		delete(s.live, name)
	}
}

// startSpecServers starts a setup's servers: one serve, or a cluster of
// nodes (the first n) on one redis-server or nats-server. It returns the /metrics URL of
// the one serve (for bytes_per_delivery and scrape), none for a cluster.
func (r *runner) startSpecServers(ctx context.Context, s specServers, cl *clusterProcs, n int) ([]string, error) {
	if s.clustered() {
		return nil, cl.grow(ctx, r, n)
	}
	maddr, err := launch.FreeAddr()
	if err != nil {
		return nil, err
	}
	// The file's own --metrics-addr, if any, comes after and wins.
	p, err := r.startServer(ctx, cl.prefix+"-server", append([]string{"--metrics-addr", maddr}, s.Flags...)...)
	if err != nil {
		return nil, err
	}
	cl.nodes = []*proc{p}
	if slices.Contains(s.Flags, "--metrics-addr") {
		return nil, nil
	}
	return []string{"http://" + maddr + "/metrics"}, nil
}

// view is the part of a setup a step runs on: its store (Redis or NATS)
// and its first n nodes, started when missing.
func (p *setupProcs) view(ctx context.Context, r *runner, n int) (clusterProcs, error) {
	if p.cl.store != nil && len(p.cl.nodes) < n {
		if err := p.cl.grow(ctx, r, n); err != nil {
			return clusterProcs{}, err
		}
	}
	v := p.cl
	v.nodes = v.nodes[:min(n, len(v.nodes))]
	return v, nil
}

// bytesOut is what the servers at meters wrote so far (WebSocket frames
// and HTTP), -1 when one cannot be read.
func bytesOut(meters []string) int64 {
	var sum int64
	for _, m := range meters {
		b, err := serverBytes(m)
		if err != nil {
			return -1
		}
		sum += b[1]
	}
	return sum
}

// all are the processes of the server side.
func (c *clusterProcs) all() []*proc {
	if c.store == nil {
		return c.nodes
	}
	return append([]*proc{c.store}, c.nodes...)
}

// scraper reads a server's /metrics every interval, as a monitoring
// system would, so that a step measures what being watched costs.
type scraper struct {
	stop            chan struct{}
	wg              sync.WaitGroup
	scrapes, failed int
}

// startScraper scrapes url every interval until end.
func startScraper(url string, every time.Duration) *scraper {
	s := &scraper{stop: make(chan struct{})}
	s.wg.Go(func() {
		client := &http.Client{Timeout: every}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.scrapes++
				resp, err := client.Get(url)
				if err != nil {
					s.failed++
					continue
				}
				if resp.StatusCode != http.StatusOK {
					s.failed++
				}
				resp.Body.Close()
			}
		}
	})
	return s
}

// end stops scraping and says how it went.
func (s *scraper) end() string {
	close(s.stop)
	s.wg.Wait()
	return fmt.Sprintf("%d scrapes of /metrics, %d failed", s.scrapes, s.failed)
}
