package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// NetDev is one network interface's byte counters since boot, as
// /proc/net/dev counts them for the caller's network namespace.
type NetDev struct {
	Name             string
	RxBytes, TxBytes uint64
}

// ReadNetDev reads the byte counters of every interface.
func ReadNetDev() ([]NetDev, error) {
	b, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		return nil, err
	}
	return parseNetDev(b)
}

// parseNetDev reads /proc/net/dev: two header lines, then one line per
// interface, "name: rx_bytes rx_packets … (8 receive fields) tx_bytes …".
func parseNetDev(b []byte) ([]NetDev, error) {
	var out []NetDev
	for i, line := range bytes.Split(b, []byte("\n")) {
		name, rest, ok := strings.Cut(string(line), ":")
		if i < 2 || !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return nil, fmt.Errorf("procstat: /proc/net/dev line %d has %d fields, want at least 9", i+1, len(f))
		}
		rx, err1 := strconv.ParseUint(f[0], 10, 64)
		tx, err2 := strconv.ParseUint(f[8], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("procstat: /proc/net/dev line %d: bytes %q and %q are not counts", i+1, f[0], f[8])
		}
		out = append(out, NetDev{Name: strings.TrimSpace(name), RxBytes: rx, TxBytes: tx})
	}
	return out, nil
}

// LinkSpeed returns an interface's link speed in bits per second, from
// /sys/class/net/NAME/speed (Mb/s). It reports false when the kernel does
// not know one: loopback and most virtual interfaces, or a link that is
// down (the file then reads -1 or cannot be read).
func LinkSpeed(name string) (float64, bool) {
	b, err := os.ReadFile("/sys/class/net/" + name + "/speed")
	if err != nil {
		return 0, false
	}
	mbps, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || mbps <= 0 {
		return 0, false
	}
	return float64(mbps) * 1e6, true
}
