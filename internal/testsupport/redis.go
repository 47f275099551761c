// Runs a real redis-server on a loopback port for tests.

package testsupport

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/launch"
)

// Redis is a redis-server process owned by a test.
type Redis struct {
	t    testing.TB
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	// extra are more redis-server arguments (cluster mode).
	extra []string
}

// StartRedis runs redis-server on a free loopback port, without persistence,
// stopped when the test ends. Without redis-server the test is skipped, or
// fails when the CI variable is set: CI installs it.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	needRedis(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Redis{t: t, dir: t.TempDir(), port: port}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

func needRedis(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed (apt-get install redis-server)")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
}

// Running reports whether the server process runs.
func (s *Redis) Running() bool { return s.cmd != nil }

// cli runs redis-cli against the server and returns its output ("" when
// it fails: the server may be down).
func (s *Redis) cli(args ...string) string {
	out, err := exec.Command("redis-cli", append([]string{"-h", "127.0.0.1", "-p", fmt.Sprint(s.port)}, args...)...).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// WaitReplicas waits up to timeout until n replicas acknowledged every
// write the server took before (Redis's WAIT) and reports how many did.
// Replication is asynchronous: a master killed before its replica read
// the last writes takes them with it, which a test of what survives a
// failover must rule out first. An answer that is no count (the server
// down, an error) is an error naming it.
func (s *Redis) WaitReplicas(n int, timeout time.Duration) (int, error) {
	out := strings.TrimSpace(s.cli("WAIT", strconv.Itoa(n), strconv.FormatInt(timeout.Milliseconds(), 10)))
	got, err := strconv.Atoi(out)
	if err != nil {
		return 0, fmt.Errorf("WAIT answered %q, not a count of replicas", out)
	}
	return got, nil
}

// Addr returns host:port.
func (s *Redis) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// URL returns the redis:// URL of database 0.
func (s *Redis) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop kills the server (SIGKILL: an outage, not a shutdown) and waits for
// it to exit. Stopping a stopped server does nothing.
func (s *Redis) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Pause stops the server (SIGSTOP) until Resume: its clients' commands
// wait unanswered, and its keys' TTLs run on, so that a key due meanwhile
// is gone once it resumes, as after a long failover.
func (s *Redis) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("pause redis-server: %v", err)
	}
}

// Resume lets a paused server go on (SIGCONT).
func (s *Redis) Resume() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatalf("resume redis-server: %v", err)
	}
}

// Restart starts the server again on the same port (empty: nothing is
// persisted) and waits until it answers.
func (s *Redis) Restart() {
	s.t.Helper()
	s.Stop()
	cmd := exec.Command("redis-server", launch.RedisArgs(s.port, s.dir, append([]string{"--logfile", filepath.Join(s.dir, "redis.log")}, s.extra...)...)...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	s.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.done) }()
	done := s.done
	exited := func() error {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start (see %s)", s.port, filepath.Join(s.dir, "redis.log"))
		default:
			return nil
		}
	}
	if err := launch.WaitRedis(context.Background(), s.Addr(), exited, 10*time.Second); err != nil {
		s.t.Fatalf("redis-server on port %d did not answer: %v", s.port, err)
	}
}
