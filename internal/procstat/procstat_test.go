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
	if s.State != 'R' || s.RSS <= 0 {
		t.Errorf("this test's own process: %+v", s)
	}
	if _, err := Read(1 << 30); !os.IsNotExist(err) {
		t.Errorf("a missing process: %v", err)
	}
	if LoadAvg() == "?" {
		t.Error("no load average")
	}
}
