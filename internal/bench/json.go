//go:build linux

package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/version"
)

// benchFile turns the table's rows into the machine-readable results that
// scalechat plan --from reads.
func benchFile(rows []Result, start time.Time, load string, pinned, smoke bool) results.BenchFile {
	f := results.BenchFile{Version: version.String(), Machine: machine(), StartedAt: start.UTC(),
		LoadAvg: load, Pinned: pinned, Smoke: smoke}
	for _, r := range rows {
		row := results.BenchRow{Scenario: r.Scenario, Clients: r.Clients, PerSecond: r.PerSecond, Ratio: r.Ratio,
			P50: r.P50, P99: r.P99, ServerCPU: r.ServerCPU, CPUPerDel: r.CPUPerDel, RSS: r.RSS,
			Saturated: r.Saturated, Figure: r.Figure, Target: r.Target, Verdict: r.Verdict, Note: r.Note, CPUNote: r.CPUNote}
		if c := r.cluster; c != nil {
			row.RedisPerDel, row.NodeRatio = c.redisUS, c.node
		}
		f.Rows = append(f.Rows, row)
	}
	return f
}

// machine names the CPU and counts the cores this process may use.
func machine() string {
	model := runtime.GOARCH
	if fh, err := os.Open("/proc/cpuinfo"); err == nil {
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores", model, runtime.NumCPU())
}
