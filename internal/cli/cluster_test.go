//go:build linux

package cli

import (
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
