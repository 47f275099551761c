package transports

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
)

// CPUs the roles are pinned to: the server on one core, the load generator
// on the other, so neither steals the other's cycles.
const (
	serverCPU    = "0"
	generatorCPU = "1"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ).
const clockTick = 10 * time.Millisecond

// Server metrics read before and after each run (docs/metrics.md).
const (
	metricWSIn    = "scalechat_received_bytes_total"
	metricWSOut   = "scalechat_sent_bytes_total"
	metricHTTPIn  = "scalechat_http_received_bytes_total"
	metricHTTPOut = "scalechat_http_sent_bytes_total"
)

// host starts the server and generator processes of a comparison.
type host struct {
	exe     string // the scalechat binary
	dir     string
	taskset string // path of taskset; empty: no pinning
	stderr  io.Writer
}

func newHost(exe, dir string, stderr io.Writer) (*host, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the scalechat binary: %w", err)
		}
	}
	h := &host{exe: exe, dir: dir, stderr: stderr}
	if p, err := exec.LookPath("taskset"); err == nil {
		h.taskset = p
	} else {
		h.logf("taskset not found: server and generator are not pinned to cores")
	}
	return h, nil
}

func (h *host) logf(format string, args ...any) {
	fmt.Fprintf(h.stderr, "%s transports: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (h *host) pinning() string {
	if h.taskset == "" {
		return "not pinned (no taskset)"
	}
	return "server on CPU " + serverCPU + ", generator on CPU " + generatorCPU + " (taskset)"
}

// command builds exe args, pinned to cpu when taskset is there. The child
// gets SIGINT when ctx ends and dies with this process.
func (h *host) command(ctx context.Context, cpu, exe string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if h.taskset != "" {
		cmd = exec.CommandContext(ctx, h.taskset, append([]string{"-c", cpu, exe}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, exe, args...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// serverProc is a running `scalechat serve`.
type serverProc struct {
	name, addr, metrics string
	cmd                 *exec.Cmd
	log                 *os.File
	exited              chan struct{}
	waitErr             error // set before exited is closed
}

// startServer starts `scalechat serve` with its metrics listener, pinned
// to the server CPU, and waits until /readyz answers.
func (h *host) startServer(ctx context.Context, name string, flags ...string) (*serverProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	maddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(h.dir, "runs", name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	args := append([]string{"serve", "--addr", addr, "--metrics-addr", maddr, "--log-level", "warn", "--shutdown-timeout", "3s"}, flags...)
	// The server's figures must not depend on the comparison's context ending.
	cmd := h.command(context.WithoutCancel(ctx), serverCPU, h.exe, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start the server: %w", err)
	}
	p := &serverProc{name: name, addr: addr, metrics: "http://" + maddr + "/metrics", cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := p.alive(); err != nil {
			p.stop()
			return nil, err
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("%s did not get ready within 10 s; see %s", name, log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive returns an error when the server has exited.
func (p *serverProc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); see %s", p.name, p.waitErr, p.log.Name())
	default:
		return nil
	}
}

// stop ends the server with SIGTERM (SIGKILL after 5 s) and waits.
func (p *serverProc) stop() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	p.log.Close()
}

// serverCounters are a server's figures at one instant.
type serverCounters struct {
	cpu               time.Duration
	bytesIn, bytesOut int64 // WebSocket + HTTP
}

// counters reads the server's CPU time from /proc and its bytes from its
// metrics.
func (p *serverProc) counters() (serverCounters, error) {
	var c serverCounters
	cpu, err := processCPU(p.cmd.Process.Pid)
	if err != nil {
		return c, err
	}
	c.cpu = cpu
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(p.metrics)
	if err != nil {
		return c, fmt.Errorf("read the server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("read the server's metrics: %s", resp.Status)
	}
	vals, err := parseMetrics(resp.Body, metricWSIn, metricWSOut, metricHTTPIn, metricHTTPOut)
	if err != nil {
		return c, fmt.Errorf("read the server's metrics: %w", err)
	}
	c.bytesIn = int64(vals[metricWSIn] + vals[metricHTTPIn])
	c.bytesOut = int64(vals[metricWSOut] + vals[metricHTTPOut])
	return c, nil
}

// parseMetrics reads the unlabelled samples of names from a Prometheus
// text exposition; every name must be present.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("metric %s is missing", n)
		}
	}
	return out, nil
}

// processCPU reads the user + system CPU time of pid from /proc.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which may hold spaces: utime is
	// field 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// genRun is one finished `scalechat loadtest`.
type genRun struct {
	step   loadtest.StepMeta
	events string
}

// runLoadtest runs `scalechat loadtest` against url, pinned to the
// generator CPU, stopped when limit passes. Exit code 1 (errors, losses)
// is a result; a run without meta.json is an error.
func (h *host) runLoadtest(ctx context.Context, name, url string, limit time.Duration, args ...string) (*genRun, error) {
	out := filepath.Join(h.dir, "runs", name+".csv")
	log, err := os.Create(filepath.Join(h.dir, "runs", name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	all := append([]string{"loadtest", "--url", url, "--out", out, "--step-name", name}, args...)
	cmd := h.command(ctx, generatorCPU, h.exe, all...)
	cmd.Stdout, cmd.Stderr = log, log
	runErr := cmd.Run()
	metaPath, _ := loadtest.Paths(out, 1)
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, fmt.Errorf("%s: loadtest ended (%v) without results; see %s", name, runErr, log.Name())
	}
	var m loadtest.Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", name, metaPath, err)
	}
	if len(m.Steps) == 0 {
		return nil, fmt.Errorf("%s: loadtest ended (%v) before finishing its step; see %s", name, runErr, log.Name())
	}
	return &genRun{step: m.Steps[0], events: out}, nil
}
