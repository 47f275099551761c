// Command metrics (go run ./bench/metrics) measures what metrics cost the chat server: it runs
// two `scalechat serve` child processes, one with metrics on and one off,
// drives the same fixed load through each at the same time (clients in
// rooms on loopback, a fixed message rate), and prints each server's CPU
// time per million deliveries, pair by pair, and the medians. Running the
// two side by side exposes both to the same noise of a shared machine;
// -alternate runs them one after the other instead.
//
//	go run ./bench/metrics                  # 7 pairs of 10 s runs at 100,000 deliveries/s each
//	go run ./bench/metrics -pairs 11 -duration 20s
//
// With metrics on, the bench scrapes /metrics once a second, as Prometheus
// would, so that the cost of a scrape counts too.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
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
)

type options struct {
	binary    string
	rooms     int
	roomSize  int
	rate      float64 // messages per second, all rooms together
	msgSize   int
	warmup    time.Duration
	duration  time.Duration
	pairs     int
	loops     int
	alternate bool
}

func main() {
	var o options
	flag.StringVar(&o.binary, "scalechat", "", "scalechat binary to run; empty builds ./cmd/scalechat with go build")
	flag.IntVar(&o.rooms, "rooms", 20, "rooms")
	flag.IntVar(&o.roomSize, "room-size", 10, "clients per room")
	flag.Float64Var(&o.rate, "rate", 10000, "chat messages per second sent, all rooms together (deliveries = rate × room size)")
	flag.IntVar(&o.msgSize, "msg-size", 100, "bytes of text per message")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "load before measuring")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per run")
	flag.IntVar(&o.pairs, "pairs", 7, "pairs of runs, one with metrics on and one off")
	flag.BoolVar(&o.alternate, "alternate", false, "run the servers of a pair one after the other instead of side by side")
	flag.IntVar(&o.loops, "loops", 0, "server event loops (--loops); 0 is the server's default")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "metricsbench:", err)
		os.Exit(1)
	}
}

type result struct {
	cpu        float64 // server CPU seconds per second
	deliveries float64 // per second, as received by the clients
}

func (r result) cpuPerMillion() float64 { return r.cpu / r.deliveries * 1e6 }

func run(ctx context.Context, o options) error {
	if o.rooms < 1 || o.roomSize < 1 || o.rate <= 0 || o.pairs < 1 || o.duration <= 0 || o.msgSize < 1 {
		return errors.New("rooms, room size, rate, pairs, duration and message size must be positive")
	}
	if o.binary == "" {
		dir, err := os.MkdirTemp("", "metricsbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.binary = filepath.Join(dir, "scalechat")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", o.binary, "./cmd/scalechat")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build scalechat (run from the module root, or pass -scalechat): %w", err)
		}
	}
	how := "side by side (both servers loaded at once)"
	if o.alternate {
		how = "alternating (one server at a time)"
	}
	fmt.Printf("metricsbench: %d rooms × %d clients, %.0f messages/s of %d bytes → %.0f deliveries/s per server; %d pairs of %v runs after %v warm-up, %s\n",
		o.rooms, o.roomSize, o.rate, o.msgSize, o.rate*float64(o.roomSize), o.pairs, o.duration, o.warmup, how)
	fmt.Printf("%-5s %-8s %11s %14s %24s\n", "pair", "metrics", "server CPU", "deliveries/s", "CPU s per 1M deliveries")
	var onCPU, offCPU, ratios []float64
	for i := range o.pairs {
		// Swap the order every pair: neither setting always goes first.
		first := i%2 == 0
		var on, off result
		var err error
		if o.alternate {
			var a, b result
			if a, err = measure(ctx, o, []bool{first}); err == nil {
				b, err = measure(ctx, o, []bool{!first})
			}
			on, off = a, b
			if !first {
				on, off = b, a
			}
		} else {
			var rs []result
			rs, err = measureAll(ctx, o, []bool{first, !first})
			if err == nil {
				on, off = rs[0], rs[1]
				if !first {
					on, off = rs[1], rs[0]
				}
			}
		}
		if err != nil {
			return fmt.Errorf("pair %d: %w", i+1, err)
		}
		for _, r := range []struct {
			name string
			r    result
		}{{"on", on}, {"off", off}} {
			fmt.Printf("%-5d %-8s %10.1f%% %14.0f %24.3f\n", i+1, r.name, r.r.cpu*100, r.r.deliveries, r.r.cpuPerMillion())
		}
		onCPU = append(onCPU, on.cpuPerMillion())
		offCPU = append(offCPU, off.cpuPerMillion())
		ratios = append(ratios, on.cpuPerMillion()/off.cpuPerMillion())
	}
	r := slices.Clone(ratios)
	slices.Sort(r)
	fmt.Printf("on/off ratios, sorted: %s\n", strings.Trim(fmt.Sprintf("%.3f", r), "[]"))
	mOn, mOff := median(onCPU), median(offCPU)
	fmt.Printf("median CPU s per 1M deliveries: metrics on %.3f, off %.3f (%+.1f %%); median of the pairs' on/off ratios %.3f → overhead %+.1f %%\n",
		mOn, mOff, (mOn/mOff-1)*100, median(ratios), (median(ratios)-1)*100)
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func measure(ctx context.Context, o options, metrics []bool) (result, error) {
	rs, err := measureAll(ctx, o, metrics)
	if err != nil {
		return result{}, err
	}
	return rs[0], nil
}

// measureAll starts one server per entry of metrics (metrics on or off),
// loads them all at once, and measures them over the same window.
func measureAll(ctx context.Context, o options, metrics []bool) ([]result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.warmup+o.duration+60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs before wg.Wait: stops the load and the scrapers

	var loads []*load
	defer func() {
		for _, l := range loads {
			l.stop()
		}
	}()
	sendErr := make(chan error, len(metrics)*o.rooms)
	for _, m := range metrics {
		l, err := startLoad(ctx, o, m, &wg, sendErr)
		if err != nil {
			return nil, err
		}
		loads = append(loads, l)
	}
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case err := <-sendErr:
			return fmt.Errorf("send: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := wait(o.warmup); err != nil {
		return nil, err
	}
	cpu0 := make([]float64, len(loads))
	got0 := make([]uint64, len(loads))
	for i, l := range loads {
		c, err := cpuSeconds(l.srv.Process.Pid)
		if err != nil {
			return nil, err
		}
		cpu0[i], got0[i] = c, l.received.Load()
	}
	t0 := time.Now()
	if err := wait(o.duration); err != nil {
		return nil, err
	}
	elapsed := time.Since(t0).Seconds()
	rs := make([]result, len(loads))
	for i, l := range loads {
		c, err := cpuSeconds(l.srv.Process.Pid)
		if err != nil {
			return nil, err
		}
		rs[i] = result{cpu: (c - cpu0[i]) / elapsed, deliveries: float64(l.received.Load()-got0[i]) / elapsed}
	}
	return rs, nil
}

// load is a server process and the clients that load it.
type load struct {
	srv      *exec.Cmd
	conns    []net.Conn
	received atomic.Uint64
}

// startLoad starts a server, with metrics or without, connects the
// clients and starts sending. The goroutines it starts join wg and end
// with ctx.
func startLoad(ctx context.Context, o options, metrics bool, wg *sync.WaitGroup, sendErr chan<- error) (*load, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metricsAddr := ""
	if metrics {
		if metricsAddr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	args := []string{"serve", "--addr", addr, "--metrics-addr", metricsAddr, "--log-level", "warn",
		"--rate-limit", "100000", "--rate-burst", "100000", "--max-connections", "0"}
	if o.loops > 0 {
		args = append(args, "--loops", strconv.Itoa(o.loops))
	}
	l := &load{srv: exec.Command(o.binary, args...)}
	l.srv.Stdout, l.srv.Stderr = os.Stderr, os.Stderr
	if err := l.srv.Start(); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	if err := waitHealthy(ctx, addr); err != nil {
		l.stop()
		return nil, err
	}
	if l.conns, err = connect(ctx, addr, o, &l.received, wg); err != nil {
		l.stop()
		return nil, err
	}
	for r := range o.rooms {
		members := l.conns[r*o.roomSize : (r+1)*o.roomSize]
		wg.Go(func() {
			if err := pace(ctx, members, o.rate/float64(o.rooms), o.msgSize); err != nil {
				sendErr <- err
			}
		})
	}
	if metrics {
		wg.Go(func() { scrapeEverySecond(ctx, "http://"+metricsAddr+"/metrics") })
	}
	return l, nil
}

// stop closes the clients and stops the server.
func (l *load) stop() {
	for _, c := range l.conns {
		c.Close()
	}
	l.srv.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { l.srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		l.srv.Process.Kill()
		<-done
	}
}

func waitHealthy(ctx context.Context, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server at %s not healthy after 10s: %v", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cpuSeconds reads the user and system CPU time of a process from
// /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server CPU time: %w", err)
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis. utime and stime are fields 14 and 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, errors.New("server CPU time: short /proc stat line")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("server CPU time: bad /proc stat line")
	}
	const clockTicks = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return float64(ut+st) / clockTicks, nil
}

// connect opens the clients, room by room, reads their joined frames, and
// starts a reader per client that counts the chat messages received.
func connect(ctx context.Context, addr string, o options, received *atomic.Uint64, wg *sync.WaitGroup) ([]net.Conn, error) {
	var conns []net.Conn
	for r := range o.rooms {
		for range o.roomSize {
			c, br, err := handshake(ctx, addr, fmt.Sprintf("bench%d", r))
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return nil, err
			}
			conns = append(conns, c)
			wg.Go(func() { readLoop(br, received) })
		}
	}
	return conns, nil
}

// handshake opens a WebSocket connection to /ws/room and returns it with a
// reader positioned after the 101 response.
func handshake(ctx context.Context, addr, room string) (net.Conn, *bufio.Reader, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	req := "GET /ws/" + room + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("upgrade: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, nil, fmt.Errorf("upgrade: %s", resp.Status)
	}
	return c, br, nil
}

// readLoop counts the text frames of chat messages (the joined frame and
// other typed frames excluded) until the connection ends.
func readLoop(br *bufio.Reader, received *atomic.Uint64) {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(br, hdr[:2]); err != nil {
			return
		}
		n := uint64(hdr[1] & 0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(br, hdr[:2]); err != nil {
				return
			}
			n = uint64(hdr[0])<<8 | uint64(hdr[1])
		case 127:
			if _, err := io.ReadFull(br, hdr[:8]); err != nil {
				return
			}
			n = 0
			for _, b := range hdr {
				n = n<<8 | uint64(b)
			}
		}
		// Chat messages start {"room": …; server frames with a type start {"type".
		peek, _ := br.Peek(min(int(n), 3))
		if len(peek) == 3 && string(peek) == `{"r` {
			received.Add(1)
		}
		if _, err := br.Discard(int(n)); err != nil {
			return
		}
	}
}

// pace sends chat messages from the members of one room, in turn, at rate
// per second, until ctx is done. It keeps the average rate exact whatever
// the timer's jitter by sending what is due since the start.
func pace(ctx context.Context, members []net.Conn, rate float64, size int) error {
	frame := maskedText(fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", size)))
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	var sent float64
	next := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			due := rate * now.Sub(start).Seconds()
			for ; sent+1 <= due; sent++ {
				if _, err := members[next].Write(frame); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				next = (next + 1) % len(members)
			}
		}
	}
}

// maskedText returns a client text frame holding s, masked with a fixed key.
func maskedText(s string) []byte {
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	var f []byte
	switch n := len(s); {
	case n < 126:
		f = append(f, 0x81, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x81, 0x80|126, byte(n>>8), byte(n))
	default:
		panic("message too long for the bench")
	}
	f = append(f, key[:]...)
	for i := range len(s) {
		f = append(f, s[i]^key[i%4])
	}
	return f
}

func scrapeEverySecond(ctx context.Context, url string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			resp, err := client.Get(url)
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}
