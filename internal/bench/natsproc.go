//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// startNATS starts nats-server with JetStream on a free loopback port, its
// store in the work folder (name-store, emptied first), pinned to the
// server CPUs as Redis is (it is part of the server side), and waits
// until JetStream answers: the store of a benchmark's setup on NATS
// (engine: nats). It stops as Redis does (proc.shutdown: SIGTERM).
func (r *runner) startNATS(ctx context.Context, name string) (*proc, error) {
	exe, err := exec.LookPath("nats-server")
	if err != nil {
		return nil, errors.New("nats-server not found (go install github.com/nats-io/nats-server/v2@v2.15.2, or a release from github.com/nats-io/nats-server)")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.dir, name+"-store")
	// A kept work folder (--dir) may hold an earlier run's streams.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir}
	p, err := r.startProc(name, r.command(context.WithoutCancel(ctx), r.serverList(), exe, args...))
	if err != nil {
		return nil, err
	}
	p.addr = "127.0.0.1:" + strconv.Itoa(port)
	r.logf("%s: nats-server %s (pid %d)", name, strings.Join(args, " "), p.pid)
	if err := waitNATS(ctx, p, 10*time.Second); err != nil {
		_ = p.shutdown(time.Second)
		return nil, err
	}
	return p, nil
}

// waitNATS waits until p's JetStream answers an account info request.
func waitNATS(ctx context.Context, p *proc, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if err := p.alive(); err != nil {
			return err
		}
		err := jetStreamAnswers(ctx, "nats://"+p.addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server's JetStream did not answer within %s (%v); see %s", limit, err, p.log.Name())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
