// Package launch is how scalechat's local servers are started, the one
// way the bench (internal/bench), the tests (internal/testsupport) and
// `scalechat cluster` (scripts/cluster.sh) share: the command lines of
// `scalechat serve` and redis-server on loopback, free ports, and the
// waits until each is ready. Who starts a process keeps watching it its
// own way (a test's cleanup, the bench's CPU samples, a detached cluster's
// pid files); what a server is started with, and when it counts as up, is
// said once, here.
package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FreePort returns a loopback port nobody listens on right now, for a
// process that must be told its port before it starts.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr is FreePort as a 127.0.0.1:PORT address.
func FreeAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}

// ServeArgs are the arguments of `scalechat serve` on addr with flags,
// its metrics on a port of their own (127.0.0.1:0) unless flags say
// --metrics-addr: local servers share the host, and none may take the
// default port another holds.
func ServeArgs(addr string, flags ...string) []string {
	args := []string{"serve", "--addr", addr}
	if !slices.Contains(flags, "--metrics-addr") && !slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "--metrics-addr=") }) {
		args = append(args, "--metrics-addr", "127.0.0.1:0")
	}
	return append(args, flags...)
}

// RedisArgs are redis-server's arguments on 127.0.0.1:port, with nothing
// persisted, its working folder dir ("": the current one), then extra.
func RedisArgs(port int, dir string, extra ...string) []string {
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "yes"}
	if dir != "" {
		args = append(args, "--dir", dir)
	}
	return append(args, extra...)
}

// RedisURL is the redis:// URL of database 0 of the redis-server at addr,
// as serve's --redis takes it.
func RedisURL(addr string) string { return "redis://" + addr + "/0" }

// WaitHTTP waits up to timeout until url answers 200 (a node's /readyz),
// polling every 20 ms; alive, when it returns an error, ends the wait
// with it (the process exited).
func WaitHTTP(ctx context.Context, url string, alive func() error, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	return poll(ctx, alive, timeout, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// WaitRedis waits up to timeout until the redis-server at addr answers
// PING (see WaitHTTP).
func WaitRedis(ctx context.Context, addr string, alive func() error, timeout time.Duration) error {
	return poll(ctx, alive, timeout, func() bool { return RedisPing(addr) })
}

// RedisPing reports whether the redis-server at addr answers PONG within
// a second.
func RedisPing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// ErrTimeout is the error of a wait that ran out of time.
var ErrTimeout = errors.New("not ready in time")

func poll(ctx context.Context, alive func() error, timeout time.Duration, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if alive != nil {
			if err := alive(); err != nil {
				return err
			}
		}
		if ready() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%s)", ErrTimeout, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
