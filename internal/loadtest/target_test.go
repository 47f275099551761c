//go:build linux

package loadtest

import (
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		url, addr, host, path, err string
	}{
		{url: "ws://127.0.0.1:8080/ws", addr: "127.0.0.1:8080", host: "127.0.0.1:8080", path: "/ws"},
		{url: "ws://localhost:9000/ws?token=x", addr: "127.0.0.1:9000", host: "localhost:9000", path: "/ws?token=x"},
		{url: "ws://127.0.0.2", addr: "127.0.0.2:80", host: "127.0.0.2", path: "/"},
		{url: "wss://127.0.0.1:8080/ws", err: "only ws://"},
		{url: "ws://no-such-host.invalid:8080/ws", err: "cannot resolve"},
		{url: "::::", err: "not a ws:// URL"},
	}
	for _, tt := range tests {
		got, err := parseTarget(tt.url)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.url, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.url, err)
		case got.addr.String() != tt.addr || got.host != tt.host || got.path != tt.path:
			t.Errorf("%s: got %s %s %s", tt.url, got.addr, got.host, got.path)
		}
	}
}
