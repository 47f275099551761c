package testsupport

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartListening starts cmd, a server that prints "listening HOST:PORT" on
// its standard output once it accepts connections (deploy/socketio's and
// deploy/bun's servers do), and returns that address. The server is stopped
// with SIGTERM after the test, and killed if it has not exited 5 s later;
// what names it in the test's failures.
func StartListening(t testing.TB, cmd *exec.Cmd, what string) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan struct{})
		go func() { <-done; _ = cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	})
	select {
	case a := <-addr:
		return a
	case <-done:
		t.Fatalf("%s exited before it listened", what)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not listen within 20 s", what)
	}
	return ""
}
