//go:build linux

package bench

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		err     bool
	}{
		{"0", "0", false},
		{"0-3", "0-3", false},
		{"3,1,2,8, 9", "1-3,8-9", false},
		{"0-3,2-5", "0-5", false},
		{"", "", true},
		{"a", "", true},
		{"3-1", "", true},
		{"-1", "", true},
	} {
		cpus, err := parseCPUList(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%q: error %v, want one: %v", tc.in, err, tc.err)
			continue
		}
		if got := formatCPUList(cpus); !tc.err && got != tc.out {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.out)
		}
	}
}

// TestSplitCPUs: two cores keep the bench's old pinning (server 0,
// generator 1); more are halved; one is shared.
func TestSplitCPUs(t *testing.T) {
	for _, tc := range []struct {
		allowed        []int
		server, genrtr string
	}{
		{[]int{0}, "0", "0"},
		{[]int{0, 1}, "0", "1"},
		{[]int{0, 1, 2}, "0", "1-2"},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, "0-7", "8-15"},
		{[]int{2, 3, 6, 7}, "2-3", "6-7"},
	} {
		s, g := splitCPUs(tc.allowed)
		if formatCPUList(s) != tc.server || formatCPUList(g) != tc.genrtr {
			t.Errorf("%v: server %v, generator %v; want %s and %s", tc.allowed, s, g, tc.server, tc.genrtr)
		}
	}
}

// TestPickCPUs: a list names CPUs this process may run on, or is refused;
// an empty one takes its side of the default split.
func TestPickCPUs(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	srv, gen, err := pickCPUs("", "")
	if err != nil {
		t.Fatal(err)
	}
	if ws, wg := splitCPUs(allowed); !slices.Equal(srv, ws) || !slices.Equal(gen, wg) {
		t.Errorf("defaults %v and %v, want %v and %v", srv, gen, ws, wg)
	}
	one := formatCPUList(allowed[:1])
	if srv, _, err := pickCPUs(one, ""); err != nil || formatCPUList(srv) != one {
		t.Errorf("--server-cpus %s: %v, %v", one, srv, err)
	}
	for _, tc := range []struct{ server, generator, want string }{
		{"100000", "", "--server-cpus: CPU 100000 is not one this process may run on"},
		{"", "x", `--generator-cpus: "x" is not a CPU list`},
	} {
		if _, _, err := pickCPUs(tc.server, tc.generator); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: error %v, want %q", tc.server, tc.generator, err, tc.want)
		}
	}
}

// TestPinning: the table's header names the CPUs, the loops a server of
// several CPUs runs, and warns when both sides share a CPU.
func TestPinning(t *testing.T) {
	for _, tc := range []struct {
		srv, gen []int
		want     string
	}{
		{[]int{0}, []int{1}, "server on CPU 0, generator on CPU 1"},
		{[]int{0, 1, 2, 3}, []int{4, 5, 6, 7}, "server on CPU 0-3, generator on CPU 4-7 (4 event loops)"},
		{[]int{0}, []int{0}, "server on CPU 0, generator on CPU 0, SHARING CPUs: each one's figures include the other's load"},
	} {
		r := &runner{taskset: "/usr/bin/taskset", srvCPUs: tc.srv, genCPUs: tc.gen}
		if got := r.pinning(); got != tc.want {
			t.Errorf("%v %v: %q, want %q", tc.srv, tc.gen, got, tc.want)
		}
	}
}

// TestRaiseFileLimit: the bench lifts its soft open-file limit to the hard
// one, for the servers it starts.
func TestRaiseFileLimit(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur == rl.Max && rl.Max > 64 {
		low := rl
		low.Cur = 64
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
			t.Skipf("cannot lower the limit to test raising it: %v", err)
		}
	}
	raiseFileLimit()
	var got unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cur != rl.Max {
		t.Errorf("soft limit %d, want the hard %d", got.Cur, rl.Max)
	}
}
