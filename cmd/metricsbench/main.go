// Command metricsbench measures what metrics cost the chat server: it runs
// `scalechat serve` as a child process with metrics on and off, in
// alternation, drives the same fixed load through it (clients in rooms on
// loopback, a fixed message rate), and prints the server's CPU time per
// run and the medians.
//
//	go run ./cmd/metricsbench                  # 5 pairs of 10 s runs at 100,000 deliveries/s
//	go run ./cmd/metricsbench -pairs 9 -duration 20s
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
	binary   string
	rooms    int
	roomSize int
	rate     float64 // messages per second, all rooms together
	msgSize  int
	warmup   time.Duration
	duration time.Duration
	pairs    int
	loops    int
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
	flag.IntVar(&o.pairs, "pairs", 5, "pairs of runs (metrics on, then off)")
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
	metrics    bool
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
	fmt.Printf("metricsbench: %d rooms × %d clients, %.0f messages/s of %d bytes → %.0f deliveries/s; %d pairs of %v runs (after %v warm-up)\n",
		o.rooms, o.roomSize, o.rate, o.msgSize, o.rate*float64(o.roomSize), o.pairs, o.duration, o.warmup)
	fmt.Printf("%-4s %-8s %12s %14s %22s\n", "run", "metrics", "server CPU", "deliveries/s", "CPU s per 1M deliveries")
	var results []result
	for i := range 2 * o.pairs {
		on := i%2 == 0
		r, err := runOnce(ctx, o, on)
		if err != nil {
			return fmt.Errorf("run %d (metrics %s): %w", i+1, onOff(on), err)
		}
		results = append(results, r)
		fmt.Printf("%-4d %-8s %11.1f%% %14.0f %22.3f\n", i+1, onOff(on), r.cpu*100, r.deliveries, r.cpuPerMillion())
	}
	var onCPU, offCPU, ratios []float64
	for i := 0; i+1 < len(results); i += 2 {
		on, off := results[i], results[i+1]
		onCPU = append(onCPU, on.cpuPerMillion())
		offCPU = append(offCPU, off.cpuPerMillion())
		ratios = append(ratios, on.cpuPerMillion()/off.cpuPerMillion())
	}
	mOn, mOff := median(onCPU), median(offCPU)
	fmt.Printf("median CPU s per 1M deliveries: metrics on %.3f, off %.3f → overhead %+.1f %% (median of pair ratios %+.1f %%)\n",
		mOn, mOff, (mOn/mOff-1)*100, (median(ratios)-1)*100)
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
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

func runOnce(ctx context.Context, o options, metrics bool) (result, error) {
	addr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	metricsAddr := ""
	if metrics {
		if metricsAddr, err = freeAddr(); err != nil {
			return result{}, err
		}
	}
	args := []string{"serve", "--addr", addr, "--metrics-addr", metricsAddr, "--log-level", "warn",
		"--rate-limit", "100000", "--rate-burst", "100000", "--max-connections", "0"}
	if o.loops > 0 {
		args = append(args, "--loops", strconv.Itoa(o.loops))
	}
	srv := exec.Command(o.binary, args...)
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		return result{}, fmt.Errorf("start server: %w", err)
	}
	defer func() {
		srv.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			srv.Process.Kill()
			<-done
		}
	}()
	if err := waitHealthy(ctx, addr); err != nil {
		return result{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, o.warmup+o.duration+30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs before wg.Wait: stops the load and the scraper

	var received atomic.Uint64
	conns, err := connect(ctx, addr, o, &received, &wg)
	if err != nil {
		return result{}, err
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	sendErr := make(chan error, o.rooms)
	for r := range o.rooms {
		members := conns[r*o.roomSize : (r+1)*o.roomSize]
		wg.Go(func() { sendErr <- pace(ctx, members, o.rate/float64(o.rooms), o.msgSize) })
	}
	if metrics {
		wg.Go(func() { scrapeEverySecond(ctx, "http://"+metricsAddr+"/metrics") })
	}
	select {
	case <-time.After(o.warmup):
	case err := <-sendErr:
		return result{}, fmt.Errorf("send: %w", err)
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	cpu0, err := cpuSeconds(srv.Process.Pid)
	if err != nil {
		return result{}, err
	}
	got0, t0 := received.Load(), time.Now()
	select {
	case <-time.After(o.duration):
	case err := <-sendErr:
		return result{}, fmt.Errorf("send: %w", err)
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	cpu1, err := cpuSeconds(srv.Process.Pid)
	if err != nil {
		return result{}, err
	}
	got1, elapsed := received.Load(), time.Since(t0).Seconds()
	return result{metrics: metrics, cpu: (cpu1 - cpu0) / elapsed, deliveries: float64(got1-got0) / elapsed}, nil
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
