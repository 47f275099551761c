//go:build linux

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/scalechat/scalechat/internal/launch"
	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
)

// CPUs the roles of scalechat bench generator are pinned to: the blaster
// on one core, the generator measured on the other, so neither steals the
// other's cycles. The scenarios take theirs from the runner (setCPUs).
const (
	serverCPU    = "0"
	generatorCPU = "1"
)

// freePort returns a loopback port nobody listens on right now.
func freePort() (int, error) { return launch.FreePort() }

// command builds exe args, pinned to cpu with taskset when available.
func (r *runner) command(ctx context.Context, cpu, exe string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if r.taskset != "" {
		cmd = exec.CommandContext(ctx, r.taskset, append([]string{"-c", cpu, exe}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, exe, args...)
	}
	// Ctrl+C in the terminal reaches the bench, which stops its children
	// itself, in order.
	// A bench killed outright takes its children with it (Pdeathsig).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// sample is one reading of a process's counters.
type sample struct {
	at  time.Time
	cpu time.Duration // utime + stime since it started
	rss int64         // bytes
}

// proc is a long-running child (server node or Redis) whose CPU time and
// RSS are sampled every 100 ms.
type proc struct {
	*sampler
	name string
	cmd  *exec.Cmd
	log  *os.File
	addr string

	waitMu  sync.Mutex
	waitErr error
	exited  chan struct{}
}

// sampler reads a process's CPU time and RSS every 100 ms until stopped
// or the process is gone.
type sampler struct {
	pid     int
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

func startSampler(pid int, exited <-chan struct{}) *sampler {
	s := &sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop(exited)
	return s
}

// halt stops sampling and waits for the sampler.
func (p *sampler) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// readStat reads the CPU time and RSS of pid from /proc.
func readStat(pid int) (sample, error) {
	st, err := procstat.Read(pid)
	return sample{at: time.Now(), cpu: st.CPU, rss: st.RSS}, err
}

func (p *sampler) loop(exited <-chan struct{}) {
	defer close(p.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if s, err := readStat(p.pid); err == nil {
			p.mu.Lock()
			p.samples = append(p.samples, s)
			p.mu.Unlock()
		}
		select {
		case <-p.stop:
			return
		case <-exited:
			return
		case <-t.C:
		}
	}
}

// now returns a fresh reading.
func (p *sampler) now() sample {
	s, err := readStat(p.pid)
	if err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if n := len(p.samples); n > 0 {
			return p.samples[n-1]
		}
	}
	return s
}

// cpuAt interpolates the process's CPU time at t between samples.
func (p *sampler) cpuAt(t time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return interpolate(p.samples, t)
}

func interpolate(ss []sample, t time.Time) time.Duration {
	if len(ss) == 0 {
		return 0
	}
	if !t.After(ss[0].at) {
		return ss[0].cpu
	}
	for i := 1; i < len(ss); i++ {
		if !t.After(ss[i].at) {
			a, b := ss[i-1], ss[i]
			f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
			return a.cpu + time.Duration(f*float64(b.cpu-a.cpu))
		}
	}
	return ss[len(ss)-1].cpu
}

// cpuBetween is the CPU time the process used between a and b.
func (p *sampler) cpuBetween(a, b time.Time) time.Duration { return p.cpuAt(b) - p.cpuAt(a) }

// maxRSS is the largest RSS sampled between a and b.
func (p *sampler) maxRSS(a, b time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var rss int64
	for _, s := range p.samples {
		if !s.at.Before(a) && !s.at.After(b) {
			rss = max(rss, s.rss)
		}
	}
	return rss
}

// startProc starts cmd, logging to dir/name.log, and samples it.
func (r *runner) startProc(name string, cmd *exec.Cmd) (*proc, error) {
	log, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, exited: make(chan struct{})}
	p.sampler = startSampler(cmd.Process.Pid, p.exited)
	go func() {
		err := cmd.Wait()
		p.waitMu.Lock()
		p.waitErr = err
		p.waitMu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

// shutdown stops the process with SIGTERM (SIGKILL after grace) and waits.
func (p *proc) shutdown(grace time.Duration) error {
	p.halt()
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	p.log.Close()
	return nil
}

// alive returns an error when the process has exited.
func (p *proc) alive() error {
	select {
	case <-p.exited:
		p.waitMu.Lock()
		defer p.waitMu.Unlock()
		how := "with status 0"
		if p.waitErr != nil {
			how = "(" + p.waitErr.Error() + ")"
		}
		return fmt.Errorf("%s exited %s; see %s", p.name, how, p.log.Name())
	default:
		return nil
	}
}

// startServer starts `scalechat serve` on a free port, pinned to the
// server CPU, and waits until /readyz answers.
func (r *runner) startServer(ctx context.Context, name string, flags ...string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return r.startServerAt(ctx, name, "127.0.0.1:"+strconv.Itoa(port), flags...)
}

// startServerAt starts `scalechat serve` on addr (see startServer).
func (r *runner) startServerAt(ctx context.Context, name, addr string, flags ...string) (*proc, error) {
	// Metrics on, as users run it (launch gives them a port of their own).
	args := launch.ServeArgs(addr, append([]string{"--log-level", "warn", "--shutdown-timeout", "3s"}, flags...)...)
	// The server's figures must not depend on a scenario's context ending.
	cmd := r.command(context.WithoutCancel(ctx), r.serverList(), r.exe, args...)
	p, err := r.startProc(name, cmd)
	if err != nil {
		return nil, err
	}
	p.addr = addr
	r.logf("%s: scalechat serve %s (pid %d)", name, strings.Join(args[1:], " "), p.pid)
	if err := waitHTTP(ctx, p, "http://"+addr+"/readyz"); err != nil {
		_ = p.shutdown(time.Second)
		return nil, err
	}
	return p, nil
}

func waitHTTP(ctx context.Context, p *proc, url string) error {
	err := launch.WaitHTTP(ctx, url, p.alive, 10*time.Second)
	if errors.Is(err, launch.ErrTimeout) {
		return fmt.Errorf("%s did not get ready within 10 s; see %s", p.name, p.log.Name())
	}
	return err
}

// startRedis starts redis-server on a free port, without persistence,
// pinned to the server CPU (it is part of the server side).
func (r *runner) startRedis(ctx context.Context, name string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return r.startRedisAt(ctx, name, port)
}

// startRedisAt starts redis-server on port (see startRedis), with extra
// arguments after the defaults (a Redis Cluster node's).
func (r *runner) startRedisAt(ctx context.Context, name string, port int, extra ...string) (*proc, error) {
	exe, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found (apt-get install redis-server)")
	}
	cmd := r.command(context.WithoutCancel(ctx), r.serverList(), exe, launch.RedisArgs(port, "", extra...)...)
	p, err := r.startProc(name, cmd)
	if err != nil {
		return nil, err
	}
	p.addr = "127.0.0.1:" + strconv.Itoa(port)
	if err := launch.WaitRedis(ctx, p.addr, p.alive, 10*time.Second); err != nil {
		_ = p.shutdown(time.Second)
		if errors.Is(err, launch.ErrTimeout) {
			return nil, fmt.Errorf("redis-server did not answer within 10 s; see %s", p.log.Name())
		}
		return nil, err
	}
	return p, nil
}

// genRun is one finished `scalechat loadtest` process.
type genRun struct {
	name     string
	meta     results.Meta
	cpu      time.Duration // the generator's CPU time, workers included
	samples  *sampler      // the generator's CPU time while it ran
	exitCode int
	csv      string // the events file (empty with --no-csv)
	log      string
}

// step returns the run's only step.
func (g *genRun) step() results.StepMeta {
	if len(g.meta.Steps) == 0 {
		return results.StepMeta{}
	}
	return g.meta.Steps[0]
}

// loadgen is a running `scalechat loadtest`.
type loadgen struct {
	name    string
	cmd     *exec.Cmd
	out     string
	log     *os.File
	sending chan struct{} // closed when its progress first says "sending" or "holding"
	done    chan struct{}
	err     error
	samples *sampler
}

// startLoadtest starts `scalechat loadtest` against url with args, pinned
// to the generator CPU; it is stopped (Ctrl+C, then killed) when timeout
// passes.
func (r *runner) startLoadtest(ctx context.Context, name, url string, timeout time.Duration, args ...string) (*loadgen, error) {
	out := filepath.Join(r.dir, name+".csv")
	all := append([]string{"loadtest", "--url", url, "--out", out, "--step-name", name}, args...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	cmd := r.command(ctx, r.generatorList(), r.exe, all...)
	log, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create log: %w", err)
	}
	cmd.Stdout = log
	stderr, err := cmd.StderrPipe()
	if err != nil {
		cancel()
		log.Close()
		return nil, err
	}
	r.logf("%s: scalechat %s", name, strings.Join(all, " "))
	if err := cmd.Start(); err != nil {
		cancel()
		log.Close()
		return nil, fmt.Errorf("start loadtest: %w", err)
	}
	g := &loadgen{name: name, cmd: cmd, out: out, log: log, sending: make(chan struct{}), done: make(chan struct{})}
	// Sampling stops by itself when the process is gone (exec.Cmd's
	// ProcessState is not safe to poll while Wait runs).
	g.samples = startSampler(cmd.Process.Pid, g.done)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		// Progress lines (one a second) go to the log; the first sending
		// or holding line tells a scenario that this generator's traffic
		// is flowing.
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			if !seen && (strings.Contains(line, " sending ") || strings.Contains(line, " holding ")) {
				seen = true
				close(g.sending)
			}
		}
		_, _ = io.Copy(log, stderr)
	}()
	go func() {
		defer cancel()
		defer close(g.done)
		<-copied
		g.err = cmd.Wait()
	}()
	return g, nil
}

// wait waits for the generator to exit and reads its meta.json.
func (g *loadgen) wait() (*genRun, error) {
	<-g.done
	g.samples.halt()
	g.log.Close()
	res := &genRun{name: g.name, log: g.log.Name(), samples: g.samples}
	if st := g.cmd.ProcessState; st != nil {
		res.cpu = st.UserTime() + st.SystemTime()
		res.exitCode = st.ExitCode()
	}
	// Exit code 1 means lost deliveries or connection errors: figures the
	// table reports. Anything else without a meta.json is a broken run.
	metaPath, _ := results.Paths(g.out, 1)
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, fmt.Errorf("%s: loadtest ended (%v) without results; see %s", g.name, g.err, res.log)
	}
	if err := json.Unmarshal(b, &res.meta); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", g.name, metaPath, err)
	}
	if len(res.meta.Steps) == 0 {
		return nil, fmt.Errorf("%s: loadtest ended (%v) before finishing its step; see %s", g.name, g.err, res.log)
	}
	if len(res.meta.Parts) > 0 {
		res.csv = g.out
	}
	return res, nil
}

// runLoadtest runs one generator to its end.
func (r *runner) runLoadtest(ctx context.Context, name, url string, timeout time.Duration, args ...string) (*genRun, error) {
	g, err := r.startLoadtest(ctx, name, url, timeout, args...)
	if err != nil {
		return nil, err
	}
	return g.wait()
}

// windowCPU is the generator's CPU time over its step's sending window
// (the whole process when the window is unknown).
func (g *genRun) windowCPU() time.Duration {
	s := g.step()
	if s.SendStartedAt.IsZero() || g.samples == nil {
		return g.cpu
	}
	return g.samples.cpuBetween(s.SendStartedAt, s.SendEndedAt)
}
