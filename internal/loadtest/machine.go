//go:build linux

package loadtest

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
	"golang.org/x/sys/unix"
)

// Machine describes the host of a run: what meta.json records, and the
// ephemeral port range the load test plans with.
type Machine struct {
	results.Machine
	portsLo, portsHi int
}

// fdReserve is the descriptors a process needs besides its connections:
// stdio, the CSV, epoll and timerfd per loop, pipes, Go runtime.
const fdReserve = 64

// InspectMachine raises the soft open-file limit to the hard one and
// describes the machine.
func InspectMachine() Machine {
	m := Machine{Machine: results.Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}}
	m.Hostname, _ = os.Hostname()
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil {
		if rl.Cur < rl.Max {
			up := rl
			up.Cur = rl.Max
			if unix.Setrlimit(unix.RLIMIT_NOFILE, &up) == nil {
				rl = up
			}
		}
		m.NofileSoft, m.NofileHard = rl.Cur, rl.Max
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		m.MemoryBytes = uint64(si.Totalram) * uint64(si.Unit)
	}
	m.portsLo, m.portsHi = 32768, 60999 // the Linux default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && lo <= hi {
				m.portsLo, m.portsHi = lo, hi
			}
		}
	}
	m.EphemeralPorts = fmt.Sprintf("%d-%d", m.portsLo, m.portsHi)
	return m
}

// Ports is the number of ephemeral ports per source address.
func (m Machine) Ports() int { return m.portsHi - m.portsLo + 1 }

// String is the one-line description printed at the start of a run.
func (m Machine) String() string {
	return fmt.Sprintf("machine: %s, %d cores, GOMAXPROCS %d, %.1f GiB memory, open files %d (hard %d), ephemeral ports %s",
		m.Hostname, m.Cores, m.GOMAXPROCS, float64(m.MemoryBytes)/(1<<30), m.NofileSoft, m.NofileHard, m.EphemeralPorts)
}

// Check refuses a plan this machine cannot hold: more connections in one
// process than its open-file limit, or more connections from one source
// address than there are ephemeral ports.
func (m Machine) Check(cfg *Config) error {
	var perProc, perMachine int
	perClient := 1
	if cfg.Transport == TransportPoll {
		perClient = 2 // a poll in flight and a POST
	}
	for _, s := range cfg.Steps {
		n := s.Clients() * perClient
		perProc = max(perProc, ceilDiv(n, cfg.Parts()))
		perMachine = max(perMachine, ceilDiv(n, cfg.Shards))
	}
	if m.NofileSoft > 0 && uint64(perProc+fdReserve) > m.NofileSoft {
		need := ceilDiv(perMachine, int(m.NofileSoft)-fdReserve)
		return fmt.Errorf("the plan holds %d connections in one process but the open-file limit is %d: use --workers %d or more",
			perProc, m.NofileSoft, max(need, cfg.Workers+1))
	}
	srcs := max(len(cfg.SourceIPs), 1)
	if perSrc := ceilDiv(perMachine, srcs); perSrc > m.Ports() {
		return fmt.Errorf("the plan opens %d connections from one source address but it has only %d ephemeral ports (%s): spread them with --source-ips, e.g. 127.0.0.1-127.0.0.%d",
			perSrc, m.Ports(), m.EphemeralPorts, ceilDiv(perMachine, m.Ports()))
	}
	return nil
}

func ceilDiv(a, b int) int {
	if b <= 0 {
		return a
	}
	return (a + b - 1) / b
}

// processCores is how many cores this process can keep busy.
func processCores() int { return min(runtime.NumCPU(), runtime.GOMAXPROCS(0)) }
