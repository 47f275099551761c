package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		line string
		want Stat
		ok   bool
	}{
		// A command name with a space and a parenthesis, as the kernel writes it.
		{"1234 (scale chat) x) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 30 0 0 20 0 9 0 100 500000000 2048 18446744073709551615",
			Stat{State: 'S', CPU: 2800 * time.Millisecond, RSS: 2048 * 4096}, true},
		{"7 (z) Z 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 0", Stat{State: 'Z'}, true},
		{"7 (short) S 1 2 3", Stat{}, false},
		{"no parenthesis", Stat{}, false},
		{"7 (x) S 1 1234 1234 0 -1 4194560 500 0 0 0 many 30 0 0 20 0 9 0 100 500000000 2048 0", Stat{}, false},
	} {
		got, err := parse([]byte(tt.line), 4096)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parse(%q) = %+v, %v; want %+v, ok %v", tt.line, got, err, tt.want, tt.ok)
		}
	}
}

func TestSelf(t *testing.T) {
	s, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	// The state is the main thread's: running, or sleeping while another
	// thread of the test runs this (CI once read S).
	if (s.State != 'R' && s.State != 'S') || s.RSS <= 0 {
		t.Errorf("this test's own process: %+v", s)
	}
	if _, err := Read(1 << 30); !os.IsNotExist(err) {
		t.Errorf("a missing process: %v", err)
	}
	if LoadAvg() == "?" {
		t.Error("no load average")
	}
}

func TestParseNetDev(t *testing.T) {
	in := `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  398188    1495    0    0    0     0          0         0   398188    1495    0    0    0     0       0          0
  eth0:126298245    7060    0    0    0     0          0         0   492914    4880    0    0    0     0       0          0
`
	got, err := parseNetDev([]byte(in))
	want := []NetDev{{"lo", 398188, 398188}, {"eth0", 126298245, 492914}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("parseNetDev = %+v, %v; want %+v", got, err, want)
	}
	if _, err := parseNetDev([]byte("h1\nh2\n  eth0: 1 2 3\n")); err == nil {
		t.Error("a short line was read")
	}
	if _, err := parseNetDev([]byte("h1\nh2\n  eth0: x 0 0 0 0 0 0 0 5 0\n")); err == nil {
		t.Error("a line whose bytes are not a count was read")
	}
}

func TestReadNetDev(t *testing.T) {
	devs, err := ReadNetDev()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == "lo" {
			if _, ok := LinkSpeed("lo"); ok {
				t.Error("loopback has a link speed")
			}
			return
		}
	}
	t.Errorf("no loopback among %+v", devs)
}
