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
// write the server took before the call, and reports how many did.
// Replication is asynchronous: a master killed before its replica read
// the last writes takes them with it, which a test of what survives a
// failover must rule out first. It compares offsets (INFO replication:
// the master's, then each replica's acknowledged one, which replicas send
// every second): Redis's WAIT counts only the writes of the client that
// asks, and a client of its own has none, so WAIT answered at once (a
// failover test so lost the last writes on a loaded machine). An answer
// without the master's offset (the server down, an error) is an error
// naming it.
func (s *Redis) WaitReplicas(n int, timeout time.Duration) (int, error) {
	info := s.cli("INFO", "replication")
	target, ok := replField(info, "master_repl_offset")
	if !ok {
		return 0, fmt.Errorf("INFO replication answered %q, without the master's offset", info)
	}
	deadline := time.Now().Add(timeout)
	for {
		acked := ackedReplicas(s.cli("INFO", "replication"), target)
		if acked >= n || time.Now().After(deadline) {
			return acked, nil
		}
		time.Sleep(50 * time.Millisecond) // replicas acknowledge once a second: no signal to wait on
	}
}

// replField reads an integer field of INFO's "name:value" lines.
func replField(info, name string) (int64, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// ackedReplicas counts the replicas in INFO replication ("slaveK:ip=…,
// offset=N,…") whose acknowledged offset reached target.
func ackedReplicas(info string, target int64) int {
	acked := 0
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, "offset=") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimSpace(line), ",") {
			if v, ok := strings.CutPrefix(kv, "offset="); ok {
				if off, err := strconv.ParseInt(v, 10, 64); err == nil && off >= target {
					acked++
				}
			}
		}
	}
	return acked
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
