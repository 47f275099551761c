//go:build linux

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsClusterSize is the servers of the NATS cluster a local cluster
// starts (StartLocalNATSCluster): three, the fewest whose JetStream keeps
// its quorum with one server down, and what --nats-replicas 3 needs.
const natsClusterSize = 3

// StartLocalNATS is StartLocalCluster on one nats-server with JetStream
// (its store in the folder's nats/, emptied first) instead of Redis: the
// nodes run with --nats.
func StartLocalNATS(ctx context.Context, exe, dir string, n int, log io.Writer, flags ...string) (*LocalCluster, error) {
	return startLocalCluster(ctx, exe, dir, n, engineNATS, log, flags)
}

// StartLocalNATSCluster is StartLocalNATS on three nats-servers routed as
// one NATS cluster, each with JetStream and a store of its own (nats-n1/
// to nats-n3/); the nodes are given the three URLs and --nats-replicas 3.
func StartLocalNATSCluster(ctx context.Context, exe, dir string, n int, log io.Writer, flags ...string) (*LocalCluster, error) {
	return startLocalCluster(ctx, exe, dir, n, engineNATSCluster, log, flags)
}

// natsServers is a local cluster's NATS: real nats-server processes on
// loopback, started as internal/testsupport/nats.go does for the tests.
// Their ports lie below the kernel's ephemeral ports (as the Redis
// Cluster's do), so that no outgoing connection takes one while its
// server is down and it can start again where the nodes look for it.
type natsServers struct {
	r   *runner
	ctx context.Context
	exe string // nats-server

	ports []int      // client ports, one a server
	args  [][]string // each server's flags
	dirs  []string   // each server's JetStream store

	mu       sync.Mutex
	procs    []*proc
	restarts int
}

// startNATSServers starts n nats-servers (1, or natsClusterSize routed as
// one cluster) and waits until JetStream answers.
func startNATSServers(ctx context.Context, r *runner, n int) (*natsServers, error) {
	exe, err := exec.LookPath("nats-server")
	if err != nil {
		return nil, errors.New("nats-server not found (go install github.com/nats-io/nats-server/v2@latest, or a release from github.com/nats-io/nats-server)")
	}
	s := &natsServers{r: r, ctx: ctx, exe: exe}
	var taken, routes []int
	for range n {
		p, err := natsPort(taken)
		if err != nil {
			return nil, err
		}
		s.ports, taken = append(s.ports, p), append(taken, p)
		if n > 1 {
			rp, err := natsPort(taken)
			if err != nil {
				return nil, err
			}
			routes, taken = append(routes, rp), append(taken, rp)
		}
	}
	routeURLs := make([]string, len(routes))
	for i, p := range routes {
		routeURLs[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	for i, port := range s.ports {
		dir := filepath.Join(r.dir, "nats")
		if n > 1 {
			dir = filepath.Join(r.dir, "nats-n"+strconv.Itoa(i+1))
		}
		// A kept --cluster-logs folder may hold an earlier run's streams.
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir}
		if n > 1 {
			args = append(args, "--server_name", "n"+strconv.Itoa(i+1), "--cluster_name", "scalechat-audit",
				"--cluster", routeURLs[i], "--routes", strings.Join(routeURLs, ","))
		}
		s.dirs, s.args = append(s.dirs, dir), append(s.args, args)
	}
	s.procs = make([]*proc, n)
	for i := range n {
		if err := s.start(i, s.name(i)); err != nil {
			s.stop()
			return nil, err
		}
	}
	if err := s.waitJetStream(ctx, s.url(), 30*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	if n > 1 {
		r.logf("nats cluster: %d nats-servers with JetStream, routed, on ports %v", n, s.ports)
	} else {
		r.logf("nats: nats-server with JetStream on port %d, its store in %s", s.ports[0], s.dirs[0])
	}
	return s, nil
}

// natsPort returns a free port in the Redis Cluster's range (below the
// ephemeral ports), none of taken.
func natsPort(taken []int) (int, error) {
	for range 200 {
		p := clusterPortLow + rand.IntN(clusterPortHigh-clusterPortLow)
		ok := portFree(p)
		for _, t := range taken {
			ok = ok && p != t
		}
		if ok {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d-%d for a nats-server", clusterPortLow, clusterPortHigh)
}

// name is server i's name: n1… in a cluster (its --server_name), nats alone.
func (s *natsServers) name(i int) string {
	if len(s.ports) == 1 {
		return "nats"
	}
	return "nats-n" + strconv.Itoa(i+1)
}

func (s *natsServers) addr(i int) string { return "127.0.0.1:" + strconv.Itoa(s.ports[i]) }

// url is the client URL list of every server.
func (s *natsServers) url() string {
	urls := make([]string, len(s.ports))
	for i := range s.ports {
		urls[i] = "nats://" + s.addr(i)
	}
	return strings.Join(urls, ",")
}

// nodeFlags are the flags that put a node on these servers.
func (s *natsServers) nodeFlags() []string {
	flags := []string{"--nats", s.url()}
	if len(s.ports) > 1 {
		flags = append(flags, "--nats-replicas", strconv.Itoa(natsClusterSize))
	}
	return flags
}

// start starts server i (logging to name.log) with its port, store and
// routes, and waits until it takes connections.
func (s *natsServers) start(i int, name string) error {
	cmd := s.r.command(context.WithoutCancel(s.ctx), s.r.serverList(), s.exe, s.args[i]...)
	p, err := s.r.startProc(name, cmd)
	if err != nil {
		return err
	}
	p.addr = s.addr(i)
	s.r.logf("%s: nats-server %s (pid %d)", name, strings.Join(s.args[i], " "), p.pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := p.alive(); err != nil {
			return err
		}
		if c, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = p.shutdown(time.Second)
			return fmt.Errorf("%s did not listen on %s within 10 s; see %s", name, p.addr, p.log.Name())
		}
		select {
		case <-s.ctx.Done():
			_ = p.shutdown(time.Second)
			return s.ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.mu.Lock()
	s.procs[i] = p
	s.mu.Unlock()
	return nil
}

// waitJetStream waits until JetStream answers through url: a cluster's
// once it has elected its meta leader (until then no stream can be made,
// and a node would fail to start).
func (s *natsServers) waitJetStream(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		if last = jetStreamAnswers(ctx, url); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("NATS JetStream at %s did not answer within %s: %v", url, limit, last)
}

// jetStreamAnswers asks the JetStream at url for its account's info: an
// answer says it has a meta leader and takes streams.
func jetStreamAnswers(ctx context.Context, url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.MaxReconnects(0))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// signal ends server i with sig (SIGKILL after 5 s) and waits for it.
func (s *natsServers) signal(i int, sig syscall.Signal) error {
	s.mu.Lock()
	p := s.procs[i]
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s is not running", s.name(i))
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s: %w", s.name(i), err)
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.halt()
	p.log.Close()
	return nil
}

// bounce ends server i with sig, waits down and starts it again on its
// port with its store, logging to a file of its own; it returns once
// the server takes connections again.
func (s *natsServers) bounce(ctx context.Context, i int, sig syscall.Signal, down time.Duration) error {
	if err := s.signal(i, sig); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	s.mu.Lock()
	s.restarts++
	name := fmt.Sprintf("%s-restart%d", s.name(i), s.restarts)
	s.procs[i] = nil
	s.mu.Unlock()
	return s.start(i, name)
}

// serverOf is the server the process pid holds the most connections to
// (-1: none): its TCP sockets, by /proc/PID/fd, whose peer is one of the
// servers' client ports, by /proc/net/tcp.
func (s *natsServers) serverOf(pid int) int {
	inodes := map[string]bool{}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return -1
	}
	for _, fd := range fds {
		link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return -1
	}
	defer f.Close()
	count := make([]int, len(s.ports))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !inodes[fields[9]] {
			continue
		}
		_, hexPort, ok := strings.Cut(fields[2], ":")
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if !ok || err != nil {
			continue
		}
		for i, p := range s.ports {
			if int(port) == p {
				count[i]++
			}
		}
	}
	best := -1
	for i, n := range count {
		if n > 0 && (best < 0 || n > count[best]) {
			best = i
		}
	}
	return best
}

func (s *natsServers) stop() {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			_ = p.shutdown(5 * time.Second)
		}
	}
}

// RestartNATS stops the one nats-server (SIGTERM: it shuts down in
// order, its JetStream store written), waits down, and starts it again on
// the same port with the same store: unlike a Redis restart without
// persistence, the rooms' streams, leases and history survive.
func (c *LocalCluster) RestartNATS(ctx context.Context, down time.Duration) error {
	switch {
	case c.nats == nil:
		return errors.New("no nats-server to restart: the nodes use Redis")
	case len(c.nats.ports) > 1:
		return errors.New("a NATS cluster is not restarted whole: kill one of its servers instead")
	}
	if err := c.nats.bounce(ctx, 0, syscall.SIGTERM, down); err != nil {
		return err
	}
	return c.nats.waitJetStream(ctx, c.nats.url(), 10*time.Second)
}

// KillNATSServer SIGKILLs one server of the NATS cluster, the one the
// first node holds its connections to (the first server when that cannot
// be told), waits down, and starts it again with its store: it rejoins
// the cluster and catches up from the others. It returns which it killed.
func (c *LocalCluster) KillNATSServer(ctx context.Context, down time.Duration) (string, error) {
	if c.nats == nil || len(c.nats.ports) < 2 {
		return "", errors.New("killing one NATS server needs a NATS cluster")
	}
	c.mu.Lock()
	node := c.nodes[0]
	c.mu.Unlock()
	victim, whose := c.nats.serverOf(node.pid), "node 0's"
	if victim < 0 {
		victim, whose = 0, "node 0's server unknown: the first"
	}
	what := fmt.Sprintf("server n%d at %s (%s)", victim+1, c.nats.addr(victim), whose)
	if err := c.nats.bounce(ctx, victim, syscall.SIGKILL, down); err != nil {
		return what, err
	}
	return what, nil
}
