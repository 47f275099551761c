//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClusterUpArgs(t *testing.T) {
	tests := []struct {
		args    []string
		dash    int
		n       int
		flags   string
		wantErr string
	}{
		{nil, -1, 3, "", ""},
		{[]string{"2"}, -1, 2, "", ""},
		{[]string{"2", "--history", "50"}, 1, 2, "--history 50", ""},
		{[]string{"--history", "50"}, 0, 3, "--history 50", ""},
		{[]string{"9"}, -1, 0, "", "1 to 8"},
		{[]string{"two"}, -1, 0, "", "1 to 8"},
		{[]string{"2", "--history"}, -1, 0, "", "after --"},
	}
	for _, tt := range tests {
		n, flags, err := upArgs(tt.args, tt.dash)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || n != tt.n || strings.Join(flags, " ") != tt.flags {
			t.Errorf("%q: %d %q %v, want %d %q", tt.args, n, flags, err, tt.n, tt.flags)
		}
	}
}

// A scenario file without bench: runs once, as compare does: the flags of
// the named scenarios are refused before anything starts; a broken file
// is a usage error too.
func TestBenchFileFlags(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.yaml")
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(plain, []byte("name: p\nsteps:\n  - {rooms: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(broken, []byte("name: b\nsteps:\n  - {rooms: 1}\nbench: {until: forever}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--repeat", "2", plain}, "not a scenario file"},
		{[]string{"bench", "--redis-linger", "2ms", plain}, "not a scenario file"},
		{[]string{"bench", broken}, "until"},
	} {
		code, _, stderr := runCLI(tt.args...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: code %d, stderr %q; want %d, %q", tt.args, code, stderr, exitUsage, tt.want)
		}
	}
}
