package scrape

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
)

// TestPIDSource reads this test's own process from /proc: its CPU time
// grows by what it burns between two snapshots, and the server-only
// figures are absent, not zero.
func TestPIDSource(t *testing.T) {
	src := PIDSource(os.Getpid())
	if src.Node != "pid:"+strconv.Itoa(os.Getpid()) {
		t.Errorf("node %q", src.Node)
	}
	a, err := src.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	burn(200 * time.Millisecond)
	b, err := src.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in 10 ms ticks; burn spins until getrusage says 200 ms of
	// CPU were used, however busy the machine.
	if used := b.CPUSeconds - a.CPUSeconds; used < 0.1 || used > 5 {
		t.Errorf("CPU grew by %.3f s over 200 ms of spinning", used)
	}
	st, err := procstat.Self()
	if err != nil {
		t.Fatal(err)
	}
	if b.RSSBytes <= 0 || math.Abs(b.RSSBytes-float64(st.RSS)) > 64<<20 {
		t.Errorf("RSS %g, /proc says %d", b.RSSBytes, st.RSS)
	}
	if !math.IsNaN(b.Connections) || !math.IsNaN(b.Deliveries) {
		t.Errorf("connections %g and deliveries %g of a process, want none", b.Connections, b.Deliveries)
	}
	if _, err := PIDSource(1 << 30).Snapshot(context.Background()); err == nil || !strings.Contains(err.Error(), "read process") {
		t.Errorf("a process that is not there: %v", err)
	}
}

// TestScraperPIDs writes rows of a process beside nothing else: node
// pid:PID, CPU seconds that only grow, the rest empty.
func TestScraperPIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	burned := make(chan struct{})
	go func() { defer close(burned); burn(250 * time.Millisecond) }()
	var out bytes.Buffer
	sum, err := (&Scraper{PIDs: []int{os.Getpid()}, Interval: 50 * time.Millisecond}).Run(ctx, &out)
	<-burned
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "run.server.csv")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, bad, err := results.ReadServer(p)
	if err != nil || bad != 0 || len(rows) != sum.Rows || len(rows) < 3 || sum.Failed != 0 {
		t.Fatalf("%d rows (summary %+v), %d malformed, %v:\n%s", len(rows), sum, bad, err, out.String())
	}
	for i, r := range rows {
		if r.Node != "pid:"+strconv.Itoa(os.Getpid()) || r.RSSBytes <= 0 || !math.IsNaN(r.Deliveries) {
			t.Errorf("row %d: %+v", i, r)
		}
		if i > 0 && r.CPUSeconds < rows[i-1].CPUSeconds {
			t.Errorf("row %d: CPU went back from %g to %g", i, rows[i-1].CPUSeconds, r.CPUSeconds)
		}
	}
	if rows[len(rows)-1].CPUSeconds <= rows[0].CPUSeconds {
		t.Errorf("CPU did not grow over 250 ms of spinning: %g → %g", rows[0].CPUSeconds, rows[len(rows)-1].CPUSeconds)
	}
}

// burn keeps one goroutine on the CPU for d.
func burn(d time.Duration) {
	// Until the process has used d of CPU (getrusage, not the /proc files
	// under test), not d of wall time: on a loaded machine d of spinning
	// may get a fraction of a core. Bounded at 20 d of wall time.
	start := cpuTime()
	x := 0
	for end := time.Now().Add(20 * d); cpuTime()-start < d && time.Now().Before(end); {
		for range 10000 {
			x++
		}
	}
	_ = x
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
