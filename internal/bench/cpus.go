//go:build linux

package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// parseCPUList reads a CPU list as taskset -c takes it, e.g. "0-3,8",
// into sorted, distinct CPU numbers.
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("%q is not a CPU list (write e.g. 0, 0-3 or 0-3,8)", s)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// formatCPUList writes sorted CPU numbers as a list with ranges, "0-3,8".
func formatCPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// allowedCPUs are the CPUs this process may run on (its affinity, which a
// container or taskset may have narrowed).
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("read the CPU affinity: %w", err)
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// splitCPUs is the default split of the allowed CPUs: the first for the
// server and the second for the generator on two (as the bench always
// did), the lower half for the server and the upper for the generator on
// more, and the one CPU for both on one.
func splitCPUs(allowed []int) (server, generator []int) {
	if len(allowed) < 2 {
		return allowed, allowed
	}
	half := len(allowed) / 2
	return allowed[:half], allowed[half:]
}

// raiseFileLimit lifts this process's soft open-file limit to its hard
// one, which the servers it starts inherit: a machine's default soft limit
// (often 1,024) would refuse the connections of the bigger scenarios while
// the hard limit allows them. The results file records the limit in force.
func raiseFileLimit() {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &rl) // best effort: the scenarios say when connections are refused
	}
}

// pickCPUs resolves --server-cpus and --generator-cpus: each list as
// given, or its side of the default split, and every CPU one this process
// may run on.
func pickCPUs(server, generator string) (srv, gen []int, err error) {
	allowed, err := allowedCPUs()
	if err != nil {
		return nil, nil, err
	}
	srv, gen = splitCPUs(allowed)
	for _, side := range []struct {
		flag, list string
		dst        *[]int
	}{{"--server-cpus", server, &srv}, {"--generator-cpus", generator, &gen}} {
		if side.list == "" {
			continue
		}
		cpus, err := parseCPUList(side.list)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", side.flag, err)
		}
		for _, c := range cpus {
			if !slices.Contains(allowed, c) {
				return nil, nil, fmt.Errorf("%s: CPU %d is not one this process may run on (%s)", side.flag, c, formatCPUList(allowed))
			}
		}
		*side.dst = cpus
	}
	return srv, gen, nil
}
