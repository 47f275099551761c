// Command cluster measures what a cross-node message costs against a local
// one (issue 6), side by side in one run:
//
//	go run ./bench/cluster                     # defaults below
//	go run ./bench/cluster -rooms 40 -duration 20s -rounds 3
//
// The same load runs against three setups, one after another, for -rounds
// rounds (so machine noise spreads over all of them):
//
//	single      one node, no Redis: every delivery is local
//	affinity    two nodes + Redis, each room's members all on one node (what
//	            HAProxy's hash gives): the messages still go through Redis for
//	            the room's global seq and history, but no delivery leaves the node
//	cross-node  two nodes + Redis, each room's members split evenly over both
//	            nodes: half of every room's deliveries cross nodes
//
// Load: -rooms rooms of -members clients, each client posting -rate
// messages per second at random phases; the text of a message is its send
// time. Printed per setup: deliveries per second, median and p99 delivery
// latency (send → receive at each member, client and server on the same
// machine), and the CPU time of the scalechat processes and of redis-server
// per delivered message, from /proc/<pid>/stat over the measurement window.
// The clients run in this process, whose CPU is not counted.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

type options struct {
	rooms, members int
	rate           float64
	duration       time.Duration
	warmup         time.Duration
	rounds         int
}

func main() {
	var o options
	flag.IntVar(&o.rooms, "rooms", 20, "rooms")
	flag.IntVar(&o.members, "members", 10, "clients per room (even: split half and half in cross-node)")
	flag.Float64Var(&o.rate, "rate", 2, "messages per second per client")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measurement window per setup and round")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "sending before the window opens")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds over the three setups")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/cluster:", err)
		os.Exit(1)
	}
}

type result struct {
	deliveries    int
	window        time.Duration
	p50, p99      time.Duration
	nodeCPU       time.Duration
	redisCPU      time.Duration
	missing, errs int
}

func run(ctx context.Context, o options) error {
	if o.members < 2 || o.members%2 != 0 {
		return errors.New("-members must be even and at least 2")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errors.New("redis-server is not installed (apt-get install redis-server)")
	}
	dir, err := os.MkdirTemp("", "scalechat-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "scalechat")
	build := exec.Command("go", "build", "-o", bin, "./cmd/scalechat")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build (run from the repository root): %w\n%s", err, out)
	}

	fmt.Printf("load: %d rooms × %d clients, %.1f msg/s each (%.0f deliveries/s expected), window %v, %d rounds\n",
		o.rooms, o.members, o.rate, float64(o.rooms*o.members*o.members)*o.rate, o.duration, o.rounds)
	setups := []string{"single", "affinity", "cross-node"}
	results := map[string][]result{}
	for round := 1; round <= o.rounds; round++ {
		for _, s := range setups {
			r, err := runSetup(ctx, o, bin, dir, s, fmt.Sprintf("r%d%s", round, s))
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			fmt.Printf("  round %d %-10s %7.0f deliveries/s  p50 %7s  p99 %7s  node %5.1f µs  redis %5.1f µs per delivery\n",
				round, s, float64(r.deliveries)/r.window.Seconds(), fmtDur(r.p50), fmtDur(r.p99),
				perDelivery(r.nodeCPU, r), perDelivery(r.redisCPU, r))
			if r.missing > 0 || r.errs > 0 {
				fmt.Printf("    warning: %d deliveries missing, %d client errors\n", r.missing, r.errs)
			}
			results[s] = append(results[s], r)
		}
	}

	fmt.Println()
	fmt.Println("setup        deliveries/s      p50      p99   node µs/deliv  redis µs/deliv  total µs/deliv")
	base := medianOf(results["single"], func(r result) float64 { return perDelivery(r.nodeCPU+r.redisCPU, r) })
	for _, s := range setups {
		rs := results[s]
		rate := medianOf(rs, func(r result) float64 { return float64(r.deliveries) / r.window.Seconds() })
		p50 := medianOf(rs, func(r result) float64 { return float64(r.p50) })
		p99 := medianOf(rs, func(r result) float64 { return float64(r.p99) })
		node := medianOf(rs, func(r result) float64 { return perDelivery(r.nodeCPU, r) })
		redis := medianOf(rs, func(r result) float64 { return perDelivery(r.redisCPU, r) })
		total := medianOf(rs, func(r result) float64 { return perDelivery(r.nodeCPU+r.redisCPU, r) })
		fmt.Printf("%-12s %12.0f %8s %8s %14.1f %15.1f %15.1f  (×%.1f)\n", s, rate,
			fmtDur(time.Duration(p50)), fmtDur(time.Duration(p99)), node, redis, total, total/base)
	}
	fmt.Println("(medians over the rounds; ×: total CPU per delivery against single)")
	return nil
}

func perDelivery(cpu time.Duration, r result) float64 {
	if r.deliveries == 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(r.deliveries)
}

func medianOf(rs []result, f func(result) float64) float64 {
	var v []float64
	for _, r := range rs {
		v = append(v, f(r))
	}
	slices.Sort(v)
	switch {
	case len(v) == 0:
		return 0
	case len(v)%2 == 0:
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// proc is a child process of the benchmark.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(name string, args ...string) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SCALECHAT_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpuTime reads the user+system time of a process from /proc (in clock
// ticks of 1/100 s, USER_HZ on Linux).
func (p *proc) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", p.cmd.Process.Pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHTTP waits until addr answers GET /readyz with 200.
func waitHTTP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			fmt.Fprintf(c, "GET /readyz HTTP/1.0\r\n\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.Contains(line, " 200 ") {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond) // nothing to wait on but the port
	}
	return fmt.Errorf("%s did not become ready", addr)
}

func runSetup(ctx context.Context, o options, bin, dir, setup, prefix string) (result, error) {
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	var redis *proc
	var redisURL string
	nodes := 1
	if setup != "single" {
		nodes = 2
		addr, err := freeAddr()
		if err != nil {
			return result{}, err
		}
		_, port, _ := net.SplitHostPort(addr)
		redis, err = startProc("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
		if err != nil {
			return result{}, err
		}
		procs = append(procs, redis)
		redisURL = "redis://" + addr + "/0"
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				return result{}, errors.New("redis-server did not start")
			}
			time.Sleep(20 * time.Millisecond) // nothing to wait on but the port
		}
	}
	var addrs []string
	var nodeProcs []*proc
	for range nodes {
		addr, err := freeAddr()
		if err != nil {
			return result{}, err
		}
		args := []string{"serve", "--addr", addr, "--metrics-addr", "127.0.0.1:0", "--log-level", "warn", "--rate-limit", "1000", "--rate-burst", "1000"}
		if redisURL != "" {
			args = append(args, "--redis", redisURL)
		}
		p, err := startProc(bin, args...)
		if err != nil {
			return result{}, err
		}
		procs = append(procs, p)
		nodeProcs = append(nodeProcs, p)
		if err := waitHTTP(ctx, addr); err != nil {
			return result{}, err
		}
		addrs = append(addrs, addr)
	}

	// Connect every client and wait for its joined frame.
	type member struct {
		conn net.Conn
		rw   io.ReadWriter // reads through the buffer the handshake may have filled
	}
	var members []*member
	defer func() {
		for _, m := range members {
			m.conn.Close()
		}
	}()
	for r := range o.rooms {
		for i := range o.members {
			node := 0
			switch setup {
			case "affinity":
				node = r % 2
			case "cross-node":
				node = i % 2
			}
			conn, br, _, err := gws.Dial(ctx, fmt.Sprintf("ws://%s/ws/%s-%d", addrs[node], prefix, r))
			if err != nil {
				return result{}, fmt.Errorf("connect: %w", err)
			}
			if br == nil {
				br = bufio.NewReader(conn)
			}
			m := &member{conn: conn, rw: struct {
				io.Reader
				io.Writer
			}{br, conn}}
			members = append(members, m)
			if err := readJoined(m.conn, m.rw); err != nil {
				return result{}, err
			}
		}
	}

	var (
		measuring  atomic.Bool
		sentIn     atomic.Int64 // messages sent inside the window
		delivered  atomic.Int64
		clientErrs atomic.Int64
		latMu      sync.Mutex
		lats       []time.Duration
	)
	sendCtx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Duration(float64(time.Second) / o.rate)
	for _, m := range members {
		wg.Go(func() { // reader
			var local []time.Duration
			for {
				msg, err := wsutil.ReadServerText(m.rw)
				if err != nil {
					break
				}
				var f struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				if json.Unmarshal(msg, &f) != nil || f.Type != "" {
					continue
				}
				sent, err := strconv.ParseInt(f.Text, 10, 64)
				if err != nil || !measuring.Load() {
					continue
				}
				delivered.Add(1)
				local = append(local, time.Since(start)-time.Duration(sent))
			}
			latMu.Lock()
			lats = append(lats, local...)
			latMu.Unlock()
		})
		wg.Go(func() { // sender, open loop at random phase
			next := time.Duration(rand.Int64N(int64(interval)))
			for {
				select {
				case <-sendCtx.Done():
					return
				case <-time.After(time.Until(start.Add(next))):
				}
				now := time.Since(start)
				if err := wsutil.WriteClientText(m.conn, []byte(fmt.Sprintf(`{"text":"%d"}`, now))); err != nil {
					if sendCtx.Err() == nil { // not the end of the run closing the connection
						clientErrs.Add(1)
					}
					return
				}
				if measuring.Load() {
					sentIn.Add(1)
				}
				next += interval
			}
		})
	}

	// Warm up, then measure the window.
	if err := sleep(ctx, o.warmup); err != nil {
		return result{}, err
	}
	cpu := func() (node, red time.Duration, err error) {
		for _, p := range nodeProcs {
			c, err := p.cpuTime()
			if err != nil {
				return 0, 0, err
			}
			node += c
		}
		if redis != nil {
			red, err = redis.cpuTime()
		}
		return node, red, err
	}
	n0, r0, err := cpu()
	if err != nil {
		return result{}, err
	}
	measuring.Store(true)
	t0 := time.Now()
	if err := sleep(ctx, o.duration); err != nil {
		return result{}, err
	}
	stopSending()
	measuring.Store(false) // deliveries of the window's messages still in flight are not counted
	window := time.Since(t0)
	n1, r1, err := cpu()
	if err != nil {
		return result{}, err
	}
	for _, m := range members {
		m.conn.Close()
	}
	wg.Wait()
	members = nil

	slices.Sort(lats)
	res := result{
		deliveries: int(delivered.Load()),
		window:     window,
		nodeCPU:    n1 - n0,
		redisCPU:   r1 - r0,
		errs:       int(clientErrs.Load()),
	}
	if len(lats) > 0 {
		res.p50 = lats[len(lats)/2]
		res.p99 = lats[len(lats)*99/100]
	}
	// Deliveries lost (not merely late) would show as a shortfall well
	// beyond the messages in flight at the edges of the window.
	if want := int(sentIn.Load()) * o.members; res.deliveries < want*95/100 {
		res.missing = want - res.deliveries
	}
	return res, nil
}

func readJoined(conn net.Conn, rw io.ReadWriter) error {
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetReadDeadline(time.Time{})
	msg, err := wsutil.ReadServerText(rw)
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	if !strings.Contains(string(msg), `"type":"joined"`) {
		return fmt.Errorf("join: got %s", msg)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
