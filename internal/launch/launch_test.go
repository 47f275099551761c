package launch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestServeArgs(t *testing.T) {
	tests := []struct {
		flags []string
		want  string
	}{
		{nil, "serve --addr A --metrics-addr 127.0.0.1:0"},
		{[]string{"--loops", "2"}, "serve --addr A --metrics-addr 127.0.0.1:0 --loops 2"},
		{[]string{"--metrics-addr", ""}, "serve --addr A --metrics-addr "},
		{[]string{"--metrics-addr=127.0.0.1:9"}, "serve --addr A --metrics-addr=127.0.0.1:9"},
	}
	for _, tt := range tests {
		if got := strings.Join(ServeArgs("A", tt.flags...), " "); got != tt.want {
			t.Errorf("ServeArgs(%q) = %q, want %q", tt.flags, got, tt.want)
		}
	}
}

func TestRedisArgs(t *testing.T) {
	got := RedisArgs(7000, "/d", "--cluster-enabled", "yes")
	for _, want := range [][]string{{"--port", "7000"}, {"--bind", "127.0.0.1"}, {"--save", ""}, {"--dir", "/d"}, {"--cluster-enabled", "yes"}} {
		i := slices.Index(got, want[0])
		if i < 0 || i+1 >= len(got) || got[i+1] != want[1] {
			t.Errorf("RedisArgs lacks %q: %q", want, got)
		}
	}
	if slices.Contains(RedisArgs(7000, ""), "--dir") {
		t.Error("no folder given, yet --dir")
	}
}

// WaitHTTP returns once the URL answers 200, with the process's own
// error when it dies first, and ErrTimeout when time runs out.
func TestWaitHTTP(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := WaitHTTP(ctx, srv.URL, nil, 5*time.Second); err != nil || calls.Load() != 3 {
		t.Errorf("ready on the third answer: %v after %d", err, calls.Load())
	}
	dead := errors.New("exited")
	if err := WaitHTTP(ctx, srv.URL, func() error { return dead }, 5*time.Second); !errors.Is(err, dead) {
		t.Errorf("a dead process: %v", err)
	}
	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer never.Close()
	if err := WaitHTTP(ctx, never.URL, nil, 100*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Errorf("never ready: %v", err)
	}
}

// RedisPing speaks enough RESP to tell a redis-server that answers from
// one that does not.
func TestRedisPing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 64)
			if n, _ := c.Read(buf); strings.HasPrefix(string(buf[:n]), "PING") {
				c.Write([]byte("+PONG\r\n"))
			}
			c.Close()
		}
	}()
	if !RedisPing(ln.Addr().String()) {
		t.Error("no PONG from the fake redis")
	}
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if RedisPing(addr) {
		t.Error("PONG from a port nobody listens on")
	}
	if err := WaitRedis(context.Background(), addr, nil, 50*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Errorf("WaitRedis on nothing: %v", err)
	}
}
