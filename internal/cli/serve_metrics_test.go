//go:build linux

package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// serve runs `scalechat serve` with args until the returned stop is
// called, which returns the exit code.
func serve(t *testing.T, env map[string]string, args ...string) (stop func() int, logs *testsupport.SyncBuffer) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs = &testsupport.SyncBuffer{}
	code := make(chan int, 1)
	go func() { code <- run(ctx, append([]string{"serve"}, args...), strings.NewReader(""), io.Discard, logs) }()
	return func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop")
			return -1
		}
	}, logs
}

// serveReady runs `scalechat serve` on a free loopback address with args
// (no metrics listener), waits until it answers /healthz and returns its
// chat URL, ws://ADDR/ws. The test checks at its end that serve stopped
// cleanly.
func serveReady(t *testing.T, args ...string) string {
	t.Helper()
	addr := testsupport.FreeAddr(t)
	stop, logs := serve(t, nil, append([]string{"--addr", addr, "--metrics-addr", ""}, args...)...)
	t.Cleanup(func() {
		if code := stop(); code != 0 {
			t.Errorf("serve exit %d\n%s", code, logs)
		}
	})
	if status, _, err := get(t, "http://"+addr+"/healthz"); err != nil || status != 200 {
		t.Fatalf("healthz: %d %v", status, err)
	}
	return "ws://" + addr + "/ws"
}

// get polls url until it answers, for up to 10 s.
func get(t *testing.T, url string) (int, string, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b), err
		}
		if time.Now().After(deadline) {
			return 0, "", err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeMetricsAddr(t *testing.T) {
	chat, metrics := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	stop, logs := serve(t, nil, "--addr", chat, "--metrics-addr", metrics)
	status, body, err := get(t, "http://"+metrics+"/metrics")
	if err != nil || status != 200 || !strings.Contains(body, "scalechat_connections 0") {
		t.Errorf("GET /metrics: %d %v\n%.300s", status, err, body)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit code %d\n%s", code, logs)
	}
	if !strings.Contains(logs.String(), "http://"+metrics+"/dashboard") {
		t.Errorf("the dashboard URL is not logged:\n%s", logs)
	}
}

func TestServeMetricsOffFromEnv(t *testing.T) {
	chat := testsupport.FreeAddr(t)
	stop, logs := serve(t, map[string]string{"SCALECHAT_METRICS_ADDR": ""}, "--addr", chat)
	if status, _, err := get(t, "http://"+chat+"/healthz"); err != nil || status != 200 {
		t.Fatalf("healthz: %d %v", status, err)
	}
	// The chat server logs its listener before the metrics one would be
	// started: stop first, then read the whole log.
	code := stop()
	if !strings.Contains(logs.String(), "scalechat listening") || strings.Contains(logs.String(), "metrics listening") {
		t.Errorf("metrics listener started with SCALECHAT_METRICS_ADDR empty:\n%s", logs)
	}
	if code != 0 {
		t.Errorf("exit code %d\n%s", code, logs)
	}
}

func TestServeMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--addr", testsupport.FreeAddr(t), "--metrics-addr", ln.Addr().String()},
		strings.NewReader(""), io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "cannot listen on "+ln.Addr().String()+" for metrics") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
