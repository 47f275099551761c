// Runs a NATS server for tests: in-process (the nats-server module), or
// the real nats-server binary as a process of its own.

package testsupport

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSVersion is the nats-server release the tests run, in-process (go.mod
// pins the module at it) and as a binary (.ci/run installs it with
// "go install github.com/nats-io/nats-server/v2@" + NATSVersion).
// TestNATSVersionIsThePinnedModule keeps the two the same.
const NATSVersion = "v2.15.2"

// StartNATS runs a NATS server with JetStream inside the test's process,
// on a free loopback port, its store in a temporary directory, and shuts
// it down when the test ends. It returns the server's client URL.
func StartNATS(t testing.TB) string {
	t.Helper()
	return StartNATSWith(t, nil)
}

// StartNATSWith is StartNATS with the server's options changed by set
// first (authentication, TLS; nil changes nothing). The URL of a server
// with TLS is tls://.
func StartNATSWith(t testing.TB, set func(*natsserver.Options)) string {
	t.Helper()
	opts := &natsserver.Options{
		Host:      "127.0.0.1",
		Port:      natsserver.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	if set != nil {
		set(opts)
	}
	s, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server in-process: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server in-process: not ready to take connections within 10s")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s.ClientURL()
}

// NATSProcess is a nats-server process owned by a test: the real binary,
// which a test may kill, stop and start again with its store kept.
type NATSProcess struct {
	t    testing.TB
	dir  string
	addr string // 127.0.0.1:port, the same across restarts
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartNATSProcess runs the nats-server binary with JetStream on a free
// loopback port, stopped when the test ends; args are more of its flags.
// Without the binary the test is skipped, or fails when the CI variable
// is set: CI installs it.
func StartNATSProcess(t testing.TB, args ...string) *NATSProcess {
	t.Helper()
	if _, err := exec.LookPath("nats-server"); err != nil {
		msg := "nats-server is not installed (go install github.com/nats-io/nats-server/v2@" + NATSVersion + ")"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	p := &NATSProcess{t: t, dir: t.TempDir(), addr: FreeAddr(t), args: args}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// StartNATSCluster runs n nats-server processes (the binary) as one NATS
// cluster with JetStream, on free loopback ports, each routed to the
// others, and waits until JetStream has elected its meta leader (until
// then a stream cannot be made). Each may be killed and started again
// (its store kept), as one server of a cluster dies and comes back.
func StartNATSCluster(t testing.TB, n int) []*NATSProcess {
	t.Helper()
	routes := make([]string, n)
	for i := range routes {
		routes[i] = "nats://" + FreeAddr(t)
	}
	ps := make([]*NATSProcess, n)
	for i := range ps {
		ps[i] = StartNATSProcess(t, "--server_name", fmt.Sprintf("n%d", i+1), "--cluster_name", "scalechat",
			"--cluster", routes[i], "--routes", strings.Join(routes, ","))
	}
	nc, err := nats.Connect(ClusterURL(ps))
	if err != nil {
		t.Fatalf("NATS cluster: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// No signal to wait on: JetStream answers once it has a meta leader.
	Eventually(t, 30*time.Second, "the NATS cluster's JetStream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return ps
}

// ClusterURL is the client URL list of a NATS cluster's servers.
func ClusterURL(ps []*NATSProcess) string {
	urls := make([]string, len(ps))
	for i, p := range ps {
		urls[i] = p.URL()
	}
	return strings.Join(urls, ",")
}

// Name is the server's name (--server_name) in a cluster, "" alone.
func (p *NATSProcess) Name() string {
	for i, a := range p.args {
		if a == "--server_name" && i+1 < len(p.args) {
			return p.args[i+1]
		}
	}
	return ""
}

// URL is the server's client URL.
func (p *NATSProcess) URL() string { return "nats://" + p.addr }

// Pid is the server's process id (0 when it is not running), for the
// cost measurements that read its CPU time.
func (p *NATSProcess) Pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Start starts the server again on the same port with the same store,
// and waits until it takes connections.
func (p *NATSProcess) Start() {
	p.t.Helper()
	if p.cmd != nil {
		return
	}
	host, port, err := net.SplitHostPort(p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	args := append([]string{"-a", host, "-p", port, "-js", "-sd", p.dir}, p.args...)
	cmd := exec.Command("nats-server", args...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start nats-server: %v", err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-p.done:
			p.cmd = nil
			p.t.Fatalf("nats-server exited at start: %v", cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			p.t.Fatalf("nats-server did not listen within 10s: %v", err)
		}
	}
}

// Stop ends the server (SIGTERM, then SIGKILL after 5s) and waits for it.
func (p *NATSProcess) Stop() {
	p.signal(syscall.SIGTERM, 5*time.Second)
}

// Kill ends the server at once (SIGKILL) and waits for it.
func (p *NATSProcess) Kill() {
	p.signal(syscall.SIGKILL, 5*time.Second)
}

func (p *NATSProcess) signal(sig syscall.Signal, grace time.Duration) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}
