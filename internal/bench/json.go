//go:build linux

package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/version"
)

// benchFile turns the table's rows into the machine-readable results that
// scalechat plan --from and scalechat bench page read.
func benchFile(rows []Result, start time.Time, command, load string, pinned, smoke bool) results.BenchFile {
	host := inspectHost()
	f := results.BenchFile{Version: version.String(), Machine: fmt.Sprintf("%s, %d cores", host.Model, host.Cores), Host: host,
		StartedAt: start.UTC(), Date: start.UTC().Format(time.DateOnly), Command: command, LoadAvg: load, Pinned: pinned, Smoke: smoke}
	for _, r := range rows {
		row := results.BenchRow{Scenario: r.Scenario, Clients: r.Clients, PerSecond: r.PerSecond, Ratio: r.Ratio,
			P50: r.P50, P99: r.P99, Max: r.Max, GenCPU: r.GenCPU, ServerCPU: r.ServerCPU, CPUPerDel: r.CPUPerDel, RSS: r.RSS,
			Saturated: r.Saturated, Loops: r.Loops, Figure: r.Figure, Target: r.Target, Verdict: r.Verdict, Note: r.Note, CPUNote: r.CPUNote}
		if c := r.cluster; c != nil {
			row.RedisPerDel, row.NodeRatio = c.storeUS, c.node
			if c.nats {
				row.Engine, row.RedisPerDel, row.NATSPerDel = "nats", 0, c.storeUS
			}
		}
		f.Rows = append(f.Rows, row)
	}
	return f
}

// writeResults writes rows as a results file to path, with the machine,
// the CPUs the runner pinned to and the command.
func (r *runner) writeResults(path string, rows []Result, start time.Time, command, load string) error {
	f := benchFile(rows, start, command, load, r.taskset != "", r.smoke)
	if r.taskset != "" {
		f.ServerCPUs, f.GeneratorCPUs = r.serverList(), r.generatorList()
	}
	return results.WriteBenchFile(path, f)
}

// targetResults are a comparison's rows as rows of a results file, named
// "SCENARIO TARGET/STEP" (the name an objective's verdict is found by).
func targetResults(scenario string, rows []results.TargetRow) []Result {
	var out []Result
	for _, t := range rows {
		row := Result{Scenario: fmt.Sprintf("%s %s/%s", scenario, t.Target, t.Step), Clients: int(t.Clients), PerSecond: t.PerSecond,
			Ratio: t.Ratio, P50: t.P50, P99: t.P99, Max: t.Max, CPUPerDel: t.CPUPerDelivery, RSS: t.RSS, Saturated: t.Saturated, Note: t.Note}
		if t.RSSPerConn > 0 {
			row.Figure = fmt.Sprintf("%.2f KiB/conn", t.RSSPerConn/1024)
		}
		out = append(out, row)
	}
	return out
}

// inspectHost describes this machine: every figure of a run holds for it.
// What cannot be read stays zero, which the page shows as not recorded.
func inspectHost() results.Host {
	h := results.Host{Model: cpuinfo("model name"), Cores: runtime.NumCPU(), OS: osRelease("PRETTY_NAME")}
	if h.Model == "" {
		h.Model = runtime.GOARCH
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		h.MemoryBytes = uint64(si.Totalram) * uint64(si.Unit)
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		h.NofileSoft = rl.Cur
	}
	return h
}

// cpuinfo is the first value of key in /proc/cpuinfo.
func cpuinfo(key string) string {
	return firstValue("/proc/cpuinfo", ":", key)
}

// osRelease is key's value in /etc/os-release, unquoted.
func osRelease(key string) string {
	return strings.Trim(firstValue("/etc/os-release", "=", key), `"`)
}

// firstValue reads "key<sep>value" lines of path and gives the first
// value of key, or "" when the file or the key is missing.
func firstValue(path, sep, key string) string {
	fh, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), sep); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
