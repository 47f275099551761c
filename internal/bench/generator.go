//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/ws"
)

// The generator benchmark measures the load generator itself, not a chat
// server:
//
// recv: a blaster process pinned to CPU 0 pushes pre-encoded chat frames
// (as scalechat's server writes them) to a few connections as fast as the
// sockets take them; the generator, pinned to CPU 1 with GOMAXPROCS=1,
// parses and records every one. Printed: messages per second with the CSV
// plain, gzipped, and not written.
//
// idle: a minimal server process accepts the connections and answers the
// handshake and the joined frame; the generator holds them (msg-frequency
// 0) and reports its RSS growth per connection.
//
// The roles run as separate processes (scalechat bench generator --role …)
// so that each has its own open-file limit and core.

// GeneratorOptions configures the generator benchmark and its roles.
type GeneratorOptions struct {
	Only     string        // "recv" or "idle"; "" runs both
	Conns    int           // recv: connections the blaster feeds
	Duration time.Duration // recv: how long each measurement receives
	Idle     int           // idle: connections to hold
	// Role, Addr and Record select what a child process does.
	Role   string // blaster, idleserver, recv or idle
	Addr   string // the blaster's or idle server's address
	Record string // recv: plain, gz or none
	Stdout io.Writer
}

// DefaultGeneratorOptions returns the documented run.
func DefaultGeneratorOptions() GeneratorOptions {
	return GeneratorOptions{Conns: 8, Duration: 5 * time.Second, Idle: 15000, Record: "plain"}
}

// RunGenerator runs the generator benchmark, or, with opt.Role, one of its
// processes.
func RunGenerator(ctx context.Context, opt GeneratorOptions) error {
	switch opt.Role {
	case "blaster":
		return blaster(opt.Conns)
	case "idleserver":
		return idleServer()
	case "recv":
		return recvBench(opt.Addr, opt.Conns, opt.Duration, opt.Record)
	case "idle":
		return idleBench(opt.Addr, opt.Idle)
	case "":
	default:
		return fmt.Errorf("unknown role %q", opt.Role)
	}
	if opt.Only != "" && opt.Only != "recv" && opt.Only != "idle" {
		return fmt.Errorf("--only takes recv or idle, not %q", opt.Only)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	w := opt.Stdout
	conns := strconv.Itoa(opt.Conns)
	fmt.Fprintf(w, "machine: %d cores, %s/%s, %s; load average %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), procstat.LoadAvg())
	if opt.Only == "" || opt.Only == "recv" {
		fmt.Fprintf(w, "\n(a) receive + record, generator on 1 core (taskset -c 1, GOMAXPROCS=1), %d connections, %v per run\n", opt.Conns, opt.Duration)
		for _, rec := range []string{"none", "plain", "gz"} {
			srv, addr, err := startRole(ctx, self, serverCPU, "--role", "blaster", "--conns", conns)
			if err != nil {
				return err
			}
			out, err := runPinned(ctx, self, generatorCPU, "--role", "recv", "--addr", addr, "--conns", conns, "--duration", opt.Duration.String(), "--record", rec)
			stopRole(srv)
			if err != nil {
				return err
			}
			fmt.Fprint(w, out)
		}
	}
	if opt.Only == "" || opt.Only == "idle" {
		fmt.Fprintf(w, "\n(b) idle connections held by one generator process\n")
		srv, addr, err := startRole(ctx, self, serverCPU, "--role", "idleserver")
		if err != nil {
			return err
		}
		out, err := runPinned(ctx, self, generatorCPU, "--role", "idle", "--addr", addr, "--idle", strconv.Itoa(opt.Idle))
		stopRole(srv)
		if err != nil {
			return err
		}
		fmt.Fprint(w, out)
	}
	return nil
}

func startRole(ctx context.Context, self, cpu string, args ...string) (*exec.Cmd, string, error) {
	cmd := exec.CommandContext(ctx, "taskset", append([]string{"-c", cpu, self, "bench", "generator"}, args...)...)
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

func stopRole(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

func runPinned(ctx context.Context, self, cpu string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "taskset", append([]string{"-c", cpu, self, "bench", "generator"}, args...)...)
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

// upgradeByHand answers a client's upgrade request on c by hand, taking
// the subprotocol the generator offers.
func upgradeByHand(c net.Conn, br *bufio.Reader) (room string, err error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return "", err
	}
	key := req.Header.Get("Sec-WebSocket-Key")
	_, err = fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		ws.AcceptKey(key), protocol.Subprotocol)
	return strings.TrimPrefix(req.URL.Path, "/ws/"), err
}

// Room names the generator uses for step 1 with prefix "bench".
const blasterRoomPre = "bench-s1-r"

// blaster accepts connections and writes pre-encoded chat frames to each
// as fast as it can, until the client sends anything (its close frame).
func blaster(conns int) error {
	return serveByHand(4096, func(c net.Conn, br *bufio.Reader, room string) {
		r, _ := strconv.Atoi(strings.TrimPrefix(room, blasterRoomPre))
		// One megabyte of frames from "senders" of this step, so every
		// delivery counts as in view.
		text := strings.Repeat("x", 256)
		due := time.Now().UnixMicro()
		var buf []byte
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
	})
}

// idleServer accepts connections, upgrades them, sends joined and then
// only waits for the client to go.
func idleServer() error {
	raiseNofile()
	return serveByHand(512, func(_ net.Conn, br *bufio.Reader, _ string) { io.Copy(io.Discard, br) })
}

// serveByHand listens on a loopback port, prints its address, and for
// every connection answers the upgrade and sends the joined frame, then
// hands the connection to handle (on a goroutine of its own, which ends
// with the connection: the process lives until its parent kills it).
func serveByHand(bufSize int, handle func(c net.Conn, br *bufio.Reader, room string)) error {
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
			br := bufio.NewReaderSize(c, bufSize)
			room, err := upgradeByHand(c, br)
			if err != nil {
				return
			}
			joined := fmt.Appendf(nil, `{"type":"joined","room":"%s","seq":0,"members":1,"history":0}`, room)
			if _, err := c.Write(ws.AppendFrame(nil, ws.OpText, true, joined)); err != nil {
				return
			}
			handle(c, br, room)
		}()
	}
}

func generatorConfig(addr string, clients int, dur time.Duration, out string) *loadtest.Config {
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
	cfg := generatorConfig(addr, conns, dur, out)
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
	s, _ := procstat.Self()
	return s.CPU.Seconds()
}

func rss() int64 {
	s, _ := procstat.Self()
	return s.RSS
}

func idleBench(addr string, n int) error {
	cfg := generatorConfig(addr, n, 15*time.Second, "")
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
