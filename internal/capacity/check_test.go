//go:build linux

package capacity

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/scrape"
	"github.com/scalechat/scalechat/internal/testsupport"
)

var (
	checkRepeat  = flag.Int("capacity.repeat", 1, "runs of each shape in TestPlanPredictsServerCPU (the median is compared)")
	checkBand    = flag.Float64("capacity.band", 2, "TestPlanPredictsServerCPU fails when measured ÷ predicted leaves [1/band, band]")
	checkFrom    = flag.String("capacity.from", "", "costs from this scalechat bench --json file instead of the committed results (benchmarks/results)")
	checkSending = flag.Duration("capacity.duration", 5*time.Second, "how long each run sends")
)

// checkShape is a load test and the same workload as scalechat plan sees it.
type checkShape struct {
	name     string
	loadtest []string
	idle     int // connections held by a second generator meanwhile
	w        Workload
}

// TestPlanPredictsServerCPU runs scalechat serve (one event loop, pinned
// to CPU 0 when taskset is there) under bounded load tests of different
// shapes (pinned to CPU 1), measures the server's CPU time over each run's
// sending window, and compares it with the CPU the plan predicts for the
// same workload on one core. The band is generous by default (×2 either
// way: the machine is shared); docs/capacity.md gives the figures of a run
// with -capacity.repeat 3 -capacity.band 1.25.
func TestPlanPredictsServerCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load tests (about 1 minute)")
	}
	figs, err := LabFigures()
	if *checkFrom != "" {
		figs, err = FromBench(*checkFrom)
	}
	if err != nil {
		t.Fatal(err)
	}
	costs, err := Derive(figs)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testsupport.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	taskset, _ := exec.LookPath("taskset")
	shapes := []checkShape{
		{"1 room × 200, 1 msg/s", []string{"--rooms", "1", "--room-size", "200"}, 0,
			Workload{Users: 200, RoomsPerUser: 1, RoomSize: 200, Rate: 1, MsgSize: 331}},
		{"500 rooms × 4, 1 msg/s", []string{"--rooms", "500", "--room-size", "4", "--ramp", "2000"}, 0,
			Workload{Users: 2000, RoomsPerUser: 1, RoomSize: 4, Rate: 1, MsgSize: 331}},
		// 100 rooms × 10 send 1 msg/s each while 2,000 more connections idle:
		// the plan sees 3,000 users sending 1,000 messages/s into rooms of 10.
		{"100 rooms × 10 + 2,000 idle", []string{"--rooms", "100", "--room-size", "10"}, 2000,
			Workload{Users: 3000, RoomsPerUser: 1, RoomSize: 10, Rate: 1000.0 / 3000, MsgSize: 331}},
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%-30s %10s %10s %8s   runs (measured cores)\n", "shape", "predicted", "measured", "ratio")
	for _, sh := range shapes {
		sh.w.Spanning = -1
		p, err := Make(sh.w, Node{Cores: 1, Memory: 1 << 30, Files: 1e6, Headroom: 0}, costs)
		if err != nil {
			t.Fatal(err)
		}
		var runs []float64
		for i := range *checkRepeat {
			got, err := measureShape(t, bin, taskset, sh, fmt.Sprintf("%d", i))
			if err != nil {
				t.Fatalf("%s: %v", sh.name, err)
			}
			runs = append(runs, got)
		}
		got := median(slices.Clone(runs))
		ratio := got / p.CPUPerNode
		fmt.Fprintf(&report, "%-30s %10.3f %10.3f %7.2f×   %.3f\n", sh.name, p.CPUPerNode, got, ratio, runs)
		if ratio > *checkBand || ratio < 1 / *checkBand {
			t.Errorf("%s: the server used %.3f cores, the plan predicted %.3f (×%.2f, outside ×%.2f either way)", sh.name, got, p.CPUPerNode, ratio, *checkBand)
		}
	}
	t.Logf("server CPU, cores (CPU seconds ÷ seconds of the sending window), load average %s:\n%s", procstat.LoadAvg(), report.String())
}

// measureShape starts a server, runs the shape's load test and returns the
// server's CPU over the sending window, in cores.
func measureShape(t *testing.T, bin, taskset string, sh checkShape, tag string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	addr := testsupport.FreeAddr(t)
	metrics := testsupport.FreeAddr(t)
	srv := pinned(ctx, taskset, "0", bin, "serve", "--addr", addr, "--loops", "1", "--metrics-addr", metrics)
	if err := srv.Start(); err != nil {
		return 0, fmt.Errorf("start the server: %w", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	if err := waitListening(addr); err != nil {
		return 0, err
	}
	cpu := sampleCPU(ctx, srv.Process.Pid)
	defer cpu.stop()
	var idle *exec.Cmd
	if sh.idle > 0 {
		hold := *checkSending + 20*time.Second
		idle = pinned(ctx, taskset, "1", bin, "loadtest", "--url", "ws://"+addr+"/ws", "--rooms", fmt.Sprint(sh.idle/10),
			"--room-size", "10", "--msg-frequency", "0", "--duration", hold.String(), "--ramp", "4000", "--no-csv",
			"--out", filepath.Join(dir, "idle.csv"))
		if err := idle.Start(); err != nil {
			return 0, fmt.Errorf("start the idle clients: %w", err)
		}
		defer func() { _ = idle.Process.Kill(); _ = idle.Wait() }()
		// The load test below measures its own window only, but the idle
		// clients must be there before it.
		if err := waitConnections(ctx, "http://"+metrics+"/metrics", sh.idle); err != nil {
			return 0, err
		}
	}
	out := filepath.Join(dir, "run"+tag+".csv")
	args := append([]string{"loadtest", "--url", "ws://" + addr + "/ws", "--duration", checkSending.String(), "--no-csv", "--out", out}, sh.loadtest...)
	lt := pinned(ctx, taskset, "1", bin, args...)
	if b, err := lt.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("loadtest: %w\n%s", err, b)
	}
	b, err := os.ReadFile(strings.TrimSuffix(out, ".csv") + ".meta.json")
	if err != nil {
		return 0, err
	}
	var meta results.Meta
	if err := json.Unmarshal(b, &meta); err != nil {
		return 0, err
	}
	if len(meta.Steps) != 1 || meta.Steps[0].ReceivedAll == 0 {
		return 0, fmt.Errorf("the load test delivered nothing")
	}
	s := meta.Steps[0]
	time.Sleep(100 * time.Millisecond) // a sample after the window's end
	used, err := cpu.between(s.SendStartedAt, s.SendEndedAt)
	if err != nil {
		return 0, err
	}
	window := s.SendEndedAt.Sub(s.SendStartedAt).Seconds()
	cores := used.Seconds() / window
	// The plan prices the workload's rate. A generator starved by a loaded
	// machine sends less and the server does less: compare the CPU the
	// server would have used at the planned rate (every sender of these
	// shapes sends 1 msg/s), not a starved run's.
	if want := float64(s.LocalClients) * window; s.Sent > 0 && float64(s.Sent) < 0.95*want {
		t.Logf("%s: the generator sent %d of the %.0f messages planned: the server's CPU is scaled to the planned rate", sh.name, s.Sent, want)
		cores *= want / float64(s.Sent)
	}
	return cores, nil
}

// waitConnections polls the server's /metrics until it holds n connections.
func waitConnections(ctx context.Context, url string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	last := -1.0
	for ctx.Err() == nil {
		if got, err := gauge(ctx, url, scrape.NameConnections); err == nil {
			if last = got; got >= float64(n) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the server held %.0f connections, not the %d idle ones, within 20s", last, n)
}

// gauge reads one unlabelled metric from a Prometheus text page.
func gauge(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	families, err := scrape.ParseText(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("%s has no %s", url, name)
}

func pinned(ctx context.Context, taskset, cpu, bin string, args ...string) *exec.Cmd {
	if taskset == "" {
		return exec.CommandContext(ctx, bin, args...)
	}
	return exec.CommandContext(ctx, taskset, append([]string{"-c", cpu, bin}, args...)...)
}

func waitListening(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			return c.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the server did not listen on %s within 10s", addr)
}

// cpuSamples is a process's CPU time read every 50 ms by a goroutine that
// stop waits for.
type cpuSamples struct {
	mu   sync.Mutex
	at   []time.Time
	cpu  []time.Duration
	done chan struct{}
	quit context.CancelFunc
}

func sampleCPU(ctx context.Context, pid int) *cpuSamples {
	ctx, quit := context.WithCancel(ctx)
	s := &cpuSamples{done: make(chan struct{}), quit: quit}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if st, err := procstat.Read(pid); err == nil {
				s.mu.Lock()
				s.at, s.cpu = append(s.at, time.Now()), append(s.cpu, st.CPU)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *cpuSamples) stop() { s.quit(); <-s.done }

// between interpolates the CPU time used from a to b.
func (s *cpuSamples) between(a, b time.Time) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := func(x time.Time) (time.Duration, bool) {
		for i := 1; i < len(s.at); i++ {
			if !x.Before(s.at[i-1]) && !x.After(s.at[i]) {
				span := s.at[i].Sub(s.at[i-1])
				frac := float64(x.Sub(s.at[i-1])) / float64(max(span, 1))
				return s.cpu[i-1] + time.Duration(frac*float64(s.cpu[i]-s.cpu[i-1])), true
			}
		}
		return 0, false
	}
	ca, okA := at(a)
	cb, okB := at(b)
	if !okA || !okB || cb <= ca {
		span := "none"
		if n := len(s.at); n > 0 {
			span = s.at[0].Format("15:04:05.000") + " … " + s.at[n-1].Format("15:04:05.000")
		}
		return 0, fmt.Errorf("no CPU samples of the server over the sending window %s … %s (samples: %s)", a.Format("15:04:05.000"), b.Format("15:04:05.000"), span)
	}
	return cb - ca, nil
}
