// Package procstat reads what Linux's /proc tells about a process and the
// machine: CPU time, resident memory and state of a process, the load
// averages, and the network interfaces' byte counters and link speeds. The
// benchmarks measure servers with it from the outside; the load generator
// watches its own links with it.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// Stat is one reading of a process's counters.
type Stat struct {
	State byte          // R, S, D, Z, T, …
	CPU   time.Duration // user + system time since the process started
	RSS   int64         // resident memory, bytes
}

// Read reads the counters of process pid.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parse(b, os.Getpagesize())
}

// Self reads the counters of the calling process.
func Self() (Stat, error) { return Read(os.Getpid()) }

// parse reads a /proc/<pid>/stat line. The fields after the command name,
// which may hold spaces and parentheses, are: state (3), utime (14), stime
// (15), rss in pages (24).
func parse(b []byte, pageSize int) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("procstat: no command name in stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("procstat: %d fields in stat, want at least 22", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, fmt.Errorf("procstat: %w", err)
	}
	return Stat{State: f[0][0], CPU: time.Duration(ut+st) * clockTick, RSS: rss * int64(pageSize)}, nil
}

// LoadAvg returns the 1-, 5- and 15-minute load averages as /proc/loadavg
// writes them, or "?".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
