//go:build linux

package bench

import (
	"fmt"
	"testing"
)

// Lines as redis-server 7 writes CLUSTER NODES: id, addr@bus, flags,
// master id, ping, pong, config epoch, link state, slots (ranges, single
// slots, and migrating ones in brackets, which are skipped).
func TestParseClusterNodes(t *testing.T) {
	out := `07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:13609@23609 myself,master - 0 1426238317000 2 connected 5461-10922 [10923->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:19535@29535 master,fail - 1426238316232 1426238315000 1 disconnected 0-5460
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:21709@31709 master - 0 1426238316232 3 connected 10923-16383 42
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:21071@31071 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238318243 1 connected
`
	got := fmt.Sprint(parseClusterNodes(out))
	want := "[{127.0.0.1:13609 true false [[5461 10922]]} {127.0.0.1:19535 true true [[0 5460]]} " +
		"{127.0.0.1:21709 true false [[10923 16383] [42 42]]} {127.0.0.1:21071 false false []}]"
	if got != want {
		t.Errorf("parsed\n%s\nwant\n%s", got, want)
	}
}
