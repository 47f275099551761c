// Runs a scalechat cluster for tests the way it runs in
// production: nodes are separate processes of the built binary, in front of
// them a real HAProxy or nginx with the configuration files shipped in
// deploy/, and Redis is a real redis-server (StartRedis).

package testsupport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/launch"
)

// ModuleRoot returns the directory holding go.mod, found from the working
// directory upwards (tests run in their package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Build compiles cmd/scalechat into dir and returns the binary's path.
// Nodes are separate processes, so one build serves every test of a
// package: call it from TestMain.
func Build(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "scalechat")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/scalechat")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// Need skips the test when the program is not installed, or fails it when
// the CI variable is set (CI installs it).
func Need(t testing.TB, program, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		msg := fmt.Sprintf("%s is not installed (apt-get install %s)", program, pkg)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// logBuffer keeps a process's output for the test log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Process is a child process owned by a test.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *logBuffer
	done chan struct{}
	err  error // from Wait, read after done
}

func startProcess(t testing.TB, name string, env []string, onLine func(string), prog string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = append(cleanEnv(), env...)
	// Its own process group, so that Kill also ends the children it forks
	// (nginx workers); and, on Linux, killed with the test binary if that
	// dies first (procattr_linux.go).
	cmd.SysProcAttr = procAttr()
	p := &Process{Name: name, cmd: cmd, out: &logBuffer{}, done: make(chan struct{})}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// An *os.File: Wait does not wait for the children holding it.
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.out.Write([]byte(line + "\n"))
			if onLine != nil {
				onLine(line)
			}
		}
		_, _ = io.Copy(p.out, pr) // after an overlong line: keep draining
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		select {
		case <-scanned:
		case <-time.After(5 * time.Second):
		}
		pr.Close()
		<-scanned
		if t.Failed() {
			t.Logf("--- output of %s:\n%s", name, p.out.String())
		}
	})
	return p
}

// cleanEnv is the test's environment without the variables that configure
// scalechat or the proxies, so that a developer's shell cannot change a test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SCALECHAT_") && !strings.HasPrefix(kv, "LB_") {
			env = append(env, kv)
		}
	}
	return env
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output returns what the process wrote so far.
func (p *Process) Output() string { return p.out.String() }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL to the process and its process group, and waits for
// the process to exit.
func (p *Process) Kill() {
	select {
	case <-p.done:
		// Children may outlive it (nginx workers): the group is still ours.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Terminate sends SIGTERM and waits up to timeout for the process to exit,
// returning its exit error (nil for status 0).
func (p *Process) Terminate(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.Name, timeout)
	}
}

// Node is a `scalechat serve` process.
type Node struct {
	*Process
	Addr string // host:port
}

// URL returns the node's ws:// URL for path.
func (n *Node) URL(path string) string { return "ws://" + n.Addr + path }

// StartNode runs `bin serve` on a free loopback port with the given extra
// flags and waits until it serves.
func StartNode(t testing.TB, bin, name string, flags ...string) *Node {
	t.Helper()
	return StartNodeAt(t, bin, name, FreeAddr(t), flags...)
}

// StartNodeAt runs `bin serve` on addr and waits until it serves.
func StartNodeAt(t testing.TB, bin, name, addr string, flags ...string) *Node {
	t.Helper()
	return StartNodeEnv(t, bin, name, addr, nil, flags...)
}

// StartNodeEnv runs `bin serve` on addr with env (NAME=value, e.g. a
// container's SCALECHAT_* variables) and waits until it serves. The --addr
// flag wins over SCALECHAT_ADDR.
func StartNodeEnv(t testing.TB, bin, name, addr string, env []string, flags ...string) *Node {
	t.Helper()
	serving := make(chan struct{})
	var once sync.Once
	// Two event loops, as test nodes have always run; launch gives the
	// metrics a port of their own (nodes share the host).
	args := launch.ServeArgs(addr, append([]string{"--loops", "2"}, flags...)...)
	p := startProcess(t, name, env, func(line string) {
		if strings.Contains(line, "msg=serving") || strings.Contains(line, `"msg":"serving"`) { // text or json logs
			once.Do(func() { close(serving) })
		}
	}, bin, args...)
	select {
	case <-serving:
	case <-p.done:
		t.Fatalf("%s exited at start: %v\n%s", name, p.err, p.Output())
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not start serving within 15s\n%s", name, p.Output())
	}
	return &Node{Process: p, Addr: addr}
}

// LoadBalancer is a load balancer process in front of nodes.
type LoadBalancer struct {
	*Process
	Addr      string // where clients connect
	StatsAddr string // HAProxy's stats page; empty for nginx
}

// URL returns the proxy's ws:// URL for path.
func (p *LoadBalancer) URL(path string) string { return "ws://" + p.Addr + path }

// StartHAProxy runs haproxy with cfg (deploy/haproxy/haproxy.cfg) in front
// of nodes, and waits until its health checks see every node up.
func StartHAProxy(t testing.TB, cfg string, nodes []*Node) *LoadBalancer {
	t.Helper()
	bin := Need(t, "haproxy", "haproxy")
	if len(nodes) > 8 {
		t.Fatalf("haproxy.cfg names at most 8 nodes, got %d", len(nodes))
	}
	px := &LoadBalancer{Addr: FreeAddr(t), StatsAddr: FreeAddr(t)}
	env := []string{"LB_ADDR=" + px.Addr, "LB_STATS_ADDR=" + px.StatsAddr}
	for i, n := range nodes {
		env = append(env, fmt.Sprintf("LB_NODE%d=%s", i+1, n.Addr))
	}
	// -db: stay in the foreground; -Ws would need systemd.
	px.Process = startProcess(t, "haproxy", env, nil, bin, "-db", "-f", cfg)
	px.WaitServers(t, len(nodes), 15*time.Second)
	return px
}

// ServerState is one line of HAProxy's stats for a server.
type ServerState struct {
	Backend, Server string
	Status          string // UP, DOWN, "UP 1/2", MAINT, no check
	Check           string // L7OK, L4CON, L7STS, INI...
	Current         int    // current sessions
}

// Servers reads HAProxy's stats page and returns the servers of backend.
func (p *LoadBalancer) Servers(backend string) ([]ServerState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.StatsAddr+"/stats;csv", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := csv.NewReader(resp.Body)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("haproxy stats: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("haproxy stats: empty")
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.TrimPrefix(strings.TrimSpace(h), "# ")] = i
	}
	var out []ServerState
	for _, row := range rows[1:] {
		get := func(name string) string {
			if i, ok := col[name]; ok && i < len(row) {
				return row[i]
			}
			return ""
		}
		if get("pxname") != backend || get("svname") == "BACKEND" || get("svname") == "FRONTEND" {
			continue
		}
		var cur int
		fmt.Sscan(get("scur"), &cur)
		out = append(out, ServerState{Backend: backend, Server: get("svname"), Status: get("status"), Check: get("check_status"), Current: cur})
	}
	return out, nil
}

// WaitServers waits until n servers of backend ws are UP with a passed
// health check.
func (p *LoadBalancer) WaitServers(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ss, err := p.Servers("ws")
		up := 0
		for _, s := range ss {
			if s.Status == "UP" && s.Check == "L7OK" {
				up++
			}
		}
		if err == nil && up == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy: want %d servers up, have %+v (err %v)\n%s", n, ss, err, p.Output())
		}
		select {
		case <-p.done:
			t.Fatalf("haproxy exited: %v\n%s", p.err, p.Output())
		case <-time.After(100 * time.Millisecond): // health checks have no event to wait on
		}
	}
}

// StartNginx runs nginx with the shipped configuration directory dir
// (deploy/nginx) in front of nodes: nginx.conf is used as is, the two files
// it includes are written for this run into a fresh prefix directory.
func StartNginx(t testing.TB, dir string, nodes []*Node) *LoadBalancer {
	t.Helper()
	bin := Need(t, "nginx", "nginx")
	prefix := t.TempDir()
	px := &LoadBalancer{Addr: FreeAddr(t)}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	conf := WriteNginxConf(t, dir, prefix, px.Addr, addrs)
	px.Process = startProcess(t, "nginx", nil, nil, bin, "-p", prefix, "-c", conf, "-g", "daemon off;")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", px.Addr, time.Second)
		if err == nil {
			c.Close()
			return px
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not accept on %s: %v\n%s", px.Addr, err, px.Output())
		}
		select {
		case <-px.done:
			t.Fatalf("nginx exited: %v\n%s", px.err, px.Output())
		case <-time.After(50 * time.Millisecond): // nothing to wait on but the port
		}
	}
}

// WriteNginxConf copies dir/nginx.conf into prefix with its included files
// written for addr and the nodes' addresses, and returns the copy's path.
func WriteNginxConf(t testing.TB, dir, prefix, addr string, nodes []string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var servers strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&servers, "server %s max_fails=2 fail_timeout=5s;\n", n)
	}
	files := map[string]string{
		"nginx.conf":             string(src),
		"scalechat-listen.conf":  "listen " + addr + ";\n",
		"scalechat-servers.conf": servers.String(),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(prefix, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(prefix, "nginx.conf")
}
