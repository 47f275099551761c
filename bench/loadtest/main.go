// Command loadtest benchmarks the load generator itself (not a chat server):
//
//	go run ./bench/loadtest            # both benchmarks
//	go run ./bench/loadtest -only recv # receive + record throughput of one core
//	go run ./bench/loadtest -only idle # memory per idle connection
//
// recv: a blaster process pinned to CPU 0 pushes pre-encoded chat frames
// (as scalechat's server writes them) to a few connections as fast as the
// sockets take them; the generator, pinned to CPU 1 with GOMAXPROCS=1,
// parses and records every one. Printed: messages per second with the CSV
// plain, gzipped, and not written.
//
// idle: a minimal server process accepts -idle connections and answers the
// handshake and the joined frame; the generator holds them (msg-frequency
// 0) and reports its RSS growth per connection.
//
// The roles run as separate processes (this binary re-executed with -role)
// so that each has its own open-file limit and core.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/ws"
)

func main() {
	role := flag.String("role", "", "internal: blaster, idleserver, recv or idle")
	only := flag.String("only", "", "run only recv or idle")
	conns := flag.Int("conns", 8, "recv: connections the blaster feeds")
	dur := flag.Duration("duration", 5*time.Second, "recv: how long each measurement receives")
	idle := flag.Int("idle", 15000, "idle: connections to hold")
	addr := flag.String("addr", "", "internal: server address")
	record := flag.String("record", "plain", "internal: plain, gz or none")
	cpuprofile := flag.String("cpuprofile", "", "internal: write the generator's CPU profile here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}

	var err error
	switch *role {
	case "blaster":
		err = blaster(*conns)
	case "idleserver":
		err = idleServer()
	case "recv":
		err = recvBench(*addr, *conns, *dur, *record)
	case "idle":
		err = idleBench(*addr, *idle)
	case "":
		err = orchestrate(*only, *conns, *dur, *idle)
	default:
		err = fmt.Errorf("unknown role %q", *role)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// orchestrate starts the server and generator processes for each benchmark.
func orchestrate(only string, conns int, dur time.Duration, idle int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("machine: %d cores, %s/%s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if only == "" || only == "recv" {
		fmt.Printf("\n(a) receive + record, generator on 1 core (taskset -c 1, GOMAXPROCS=1), %d connections, %v per run\n", conns, dur)
		for _, rec := range []string{"none", "plain", "gz"} {
			srv, addr, err := startServer(self, "0", "-role", "blaster", "-conns", strconv.Itoa(conns))
			if err != nil {
				return err
			}
			out, err := runPinned(self, "1", "-role", "recv", "-addr", addr, "-conns", strconv.Itoa(conns), "-duration", dur.String(), "-record", rec)
			stopServer(srv)
			if err != nil {
				return err
			}
			fmt.Print(out)
		}
	}
	if only == "" || only == "idle" {
		fmt.Printf("\n(b) idle connections held by one generator process\n")
		srv, addr, err := startServer(self, "0", "-role", "idleserver")
		if err != nil {
			return err
		}
		out, err := runPinned(self, "1", "-role", "idle", "-addr", addr, "-idle", strconv.Itoa(idle))
		stopServer(srv)
		if err != nil {
			return err
		}
		fmt.Print(out)
	}
	return nil
}

func startServer(self, cpu string, args ...string) (*exec.Cmd, string, error) {
	cmd := exec.Command("taskset", append([]string{"-c", cpu, self}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start server (needs taskset): %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, "", fmt.Errorf("server did not start: %w", err)
	}
	go io.Copy(io.Discard, stdout)
	return cmd, strings.TrimSpace(line), nil
}

func stopServer(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

func runPinned(self, cpu string, args ...string) (string, error) {
	cmd := exec.Command("taskset", append([]string{"-c", cpu, self}, args...)...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	return string(out), err
}

func raiseNofile() {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		rl.Cur = rl.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	}
}

// upgrade answers a client's upgrade request on c by hand.
func upgrade(c net.Conn, br *bufio.Reader) (room string, err error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return "", err
	}
	key := req.Header.Get("Sec-WebSocket-Key")
	_, err = fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", ws.AcceptKey(key))
	return strings.TrimPrefix(req.URL.Path, "/ws/"), err
}

// Room names the generator uses for step 1 with prefix "bench".
const roomPre = "bench-s1-r"

// blaster accepts connections and writes pre-encoded chat frames to each
// as fast as it can, until the client sends anything (its close frame).
func blaster(conns int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			room, err := upgrade(c, br)
			if err != nil {
				return
			}
			r, _ := strconv.Atoi(strings.TrimPrefix(room, roomPre))
			var buf []byte
			buf = ws.AppendFrame(buf, ws.OpText, true, fmt.Appendf(nil, `{"type":"joined","room":"%s","seq":0,"members":1,"history":0}`, room))
			if _, err := c.Write(buf); err != nil {
				return
			}
			// One megabyte of frames from "senders" of this step, so
			// every delivery counts as in view.
			text := strings.Repeat("x", 256)
			due := time.Now().UnixMicro()
			buf = buf[:0]
			for seq := 1; len(buf) < 1<<20; seq++ {
				sender := uint64((r + seq) % conns)
				p := fmt.Appendf(nil, `{"room":"%s","seq":%d,"server_at":"2026-11-21T10:00:00.124031Z","message_id":%d,"due_us":%d,"text":"%s"}`,
					room, seq, sender<<32|uint64(seq), due, text)
				buf = ws.AppendFrame(buf, ws.OpText, true, p)
			}
			stop := make(chan struct{})
			go func() {
				br.ReadByte() // the client's close frame, or EOF
				close(stop)
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

// idleServer accepts connections, upgrades them, sends joined and then
// only waits for the client to go.
func idleServer() error {
	raiseNofile()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			br := bufio.NewReaderSize(c, 512)
			room, err := upgrade(c, br)
			if err != nil {
				return
			}
			c.Write(ws.AppendFrame(nil, ws.OpText, true, fmt.Appendf(nil, `{"type":"joined","room":"%s","seq":0,"members":1,"history":0}`, room)))
			io.Copy(io.Discard, br)
		}()
	}
}

func runConfig(addr string, clients int, dur time.Duration, out string) *loadtest.Config {
	return &loadtest.Config{
		URL: "ws://" + addr + "/ws", RoomPrefix: "bench", Seed: 1, Loops: 1, ConnectTimeout: loadtest.Duration(10 * time.Second),
		Out: out, NoRecord: out == "",
		Steps: []loadtest.Step{{Name: "s1", Rooms: clients, RoomSize: 1, RoomsPerClient: 1, MsgFrequency: 0, MsgSize: 256,
			Duration: loadtest.Duration(dur), Ramp: 5000}},
	}
}

func recvBench(addr string, conns int, dur time.Duration, record string) error {
	dir, err := os.MkdirTemp("", "bench-loadtest")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := ""
	switch record {
	case "plain":
		out = filepath.Join(dir, "run.csv")
	case "gz":
		out = filepath.Join(dir, "run.csv.gz")
	}
	cfg := runConfig(addr, conns, dur, out)
	if err := cfg.Validate(); err != nil {
		return err
	}
	cpu0 := cpuSeconds()
	res, err := loadtest.Run(context.Background(), context.Background(), cfg, loadtest.Options{Stdout: io.Discard, Stderr: io.Discard, Machine: loadtest.InspectMachine()})
	if err != nil {
		return err
	}
	cpu := cpuSeconds() - cpu0
	s := res.Meta.Steps[0]
	secs := s.EndedAt.Sub(s.StartedAt).Seconds()
	size := ""
	if out != "" {
		if st, err := os.Stat(out); err == nil {
			size = fmt.Sprintf(", file %.0f MB (%.1f MB/s)", float64(st.Size())/1e6, float64(st.Size())/1e6/secs)
		}
	}
	fmt.Printf("  record %-5s  %9.0f msgs/s  %5.2f µs CPU/msg  (%d messages in %.2f s, generator CPU %.0f%% of its core, %d connect errors%s)\n",
		record, float64(s.ReceivedAll)/secs, cpu*1e6/float64(s.ReceivedAll), s.ReceivedAll, secs, 100*cpu/secs, s.ConnectErrors, size)
	return nil
}

// rssWatch samples the RSS once the progress line says the clients hold.
type rssWatch struct {
	holding chan struct{}
	once    sync.Once
}

func (w *rssWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(" holding ")) {
		w.once.Do(func() { close(w.holding) })
	}
	return len(p), nil
}

func cpuSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func idleBench(addr string, n int) error {
	cfg := runConfig(addr, n, 15*time.Second, "")
	cfg.Steps[0].Ramp = 5000
	if err := cfg.Validate(); err != nil {
		return err
	}
	m := loadtest.InspectMachine()
	if err := m.Check(cfg); err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	before := rss()
	w := &rssWatch{holding: make(chan struct{})}
	type result struct {
		res *loadtest.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := loadtest.Run(context.Background(), context.Background(), cfg, loadtest.Options{Stdout: io.Discard, Stderr: w, Machine: m})
		done <- result{res, err}
	}()
	var raw, afterGC int64
	select {
	case <-w.holding:
		time.Sleep(2 * time.Second) // let the connect burst's garbage settle
		raw = rss()
		runtime.GC()
		debug.FreeOSMemory()
		afterGC = rss()
	case r := <-done:
		return fmt.Errorf("run ended before holding: %v", r.err)
	}
	r := <-done
	if r.err != nil {
		return r.err
	}
	s := r.res.Meta.Steps[0]
	fmt.Printf("  %d connections held (%d connect errors): RSS %.1f MB before, %.1f MB holding, %.1f MB after GC\n",
		s.Joined, s.ConnectErrors, float64(before)/1e6, float64(raw)/1e6, float64(afterGC)/1e6)
	if s.Joined > 0 {
		fmt.Printf("  per connection: %.2f KiB (%.2f KiB after GC)\n",
			float64(raw-before)/float64(s.Joined)/1024, float64(afterGC-before)/float64(s.Joined)/1024)
	}
	return nil
}
