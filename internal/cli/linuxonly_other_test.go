//go:build !linux

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// On other systems the commands built on epoll answer that they need Linux,
// with a failing exit code, whatever their flags.
func TestLinuxOnlyCommandsSaySo(t *testing.T) {
	tests := [][]string{
		{"serve"},
		{"serve", "--addr", "127.0.0.1:0"},
		{"loadtest", "--url", "ws://127.0.0.1:8080/ws"},
		{"bench"},
		{"audit", "--cluster", "2", "--duration", "1s"},
	}
	for _, args := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), "needs Linux") {
			t.Errorf("scalechat %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr.String())
		}
	}
}
