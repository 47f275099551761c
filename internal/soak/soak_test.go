//go:build linux

package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/scalechat/scalechat/internal/protocol"
)

var (
	duration = flag.Duration("soak.duration", 20*time.Second, "how long clients churn")
	clients  = flag.Int("soak.clients", 40, "clients connected at any time")
	csvOut   = flag.String("soak.csv", "", "write the samples to this CSV file")
)

var addrRE = regexp.MustCompile(`(url|metrics)=http://([0-9.:]+)/`)

// sample is one second of the server's life.
type sample struct {
	at          time.Duration
	goroutines  float64
	openFDs     float64
	rss         float64
	connections float64
	delivered   float64
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	bin := filepath.Join(t.TempDir(), "scalechat")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/scalechat").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--room-grace", "1s", "--history", "50", "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan map[string]string, 1)
	go func() {
		addrs := map[string]string{}
		sc := bufio.NewScanner(stderr)
		for len(addrs) < 2 && sc.Scan() {
			for _, m := range addrRE.FindAllStringSubmatch(sc.Text(), -1) {
				addrs[m[1]] = m[2]
			}
		}
		found <- addrs
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var addrs map[string]string
	select {
	case addrs = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("server did not print its addresses in 30 s")
	}
	if len(addrs) < 2 {
		t.Fatalf("server did not print its addresses: %v", addrs)
	}
	chat, metricsURL := addrs["url"], "http://"+addrs["metrics"]+"/metrics"

	start := time.Now()
	baseline := scrape(t, metricsURL, 0)

	// Churn: every client connects to one of 20 rooms, joins a second one,
	// talks a little, leaves it, and goes; a few stay throughout.
	ctx, stop := context.WithTimeout(context.Background(), *duration)
	defer stop()
	var wg sync.WaitGroup
	var sessions, failures atomic.Int64
	for i := range *clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				if err := session(ctx, chat, rng, i < 5); err != nil && ctx.Err() == nil {
					failures.Add(1)
					t.Logf("client %d: %v", i, err)
				}
				sessions.Add(1)
			}
		})
	}
	var samples []sample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
sampling:
	for {
		select {
		case <-ctx.Done():
			break sampling
		case <-tick.C:
			samples = append(samples, scrape(t, metricsURL, time.Since(start)))
		}
	}
	wg.Wait()
	// Once everyone left and the rooms' grace is over, the server is back
	// where it started.
	var after sample
	// Bounded generously: under a loaded CI machine the last connections'
	// goroutines (net/http's, for upgrades and polls) took longer than 15 s
	// to end once, and were gone a moment later.
	deadline := time.Now().Add(40 * time.Second)
	for {
		after = scrape(t, metricsURL, time.Since(start))
		if after.connections == 0 && after.goroutines <= baseline.goroutines+2 && after.openFDs <= baseline.openFDs+2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // polling: the server has no event for "idle again"
	}
	writeCSV(t, append(append([]sample{baseline}, samples...), after))

	t.Logf("%d sessions, %d failed, %.0f messages delivered, %d samples", sessions.Load(), failures.Load(), after.delivered, len(samples))
	t.Logf("baseline: goroutines %.0f, open files %.0f, RSS %.1f MiB", baseline.goroutines, baseline.openFDs, baseline.rss/(1<<20))
	t.Logf("after:    goroutines %.0f, open files %.0f, RSS %.1f MiB", after.goroutines, after.openFDs, after.rss/(1<<20))
	if failures.Load() > sessions.Load()/20 {
		t.Errorf("%d of %d sessions failed", failures.Load(), sessions.Load())
	}
	if after.connections != 0 || after.goroutines > baseline.goroutines+2 || after.openFDs > baseline.openFDs+2 {
		t.Errorf("not back to the baseline once idle: %+v vs %+v", after, baseline)
		if resp, err := http.Get(strings.TrimSuffix(metricsURL, "metrics") + "debug/pprof/goroutine?debug=1"); err == nil {
			dump, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Logf("server goroutines:\n%s", dump)
		}
	}
	// Under steady churn nothing may keep growing: compare the medians of
	// the second and last thirds of the run (the first third warms up).
	if len(samples) < 9 {
		t.Fatalf("only %d samples", len(samples))
	}
	n := len(samples) / 3
	mid, last := samples[n:2*n], samples[2*n:]
	for _, c := range []struct {
		name       string
		get        func(sample) float64
		slack, pct float64
	}{
		{"goroutines", func(s sample) float64 { return s.goroutines }, 10, 0.10},
		{"open files", func(s sample) float64 { return s.openFDs }, 20, 0.10},
		{"RSS", func(s sample) float64 { return s.rss }, 8 << 20, 0.20},
	} {
		a, b := median(mid, c.get), median(last, c.get)
		t.Logf("%-10s median of the middle third %.0f, of the last third %.0f", c.name, a, b)
		if b > a+c.slack && b > a*(1+c.pct) {
			t.Errorf("%s keep growing: %.0f then %.0f", c.name, a, b)
		}
	}
}

// session is one client's visit.
func session(ctx context.Context, addr string, rng *rand.Rand, stay bool) error {
	room := fmt.Sprintf("soak-%d", rng.IntN(20))
	// A generous timeout: the test is about leaks, and CI's machine may be busy.
	conn, br, _, err := gws.Dialer{Timeout: 15 * time.Second, Protocols: []string{protocol.Subprotocol}}.Dial(ctx, "ws://"+addr+"/ws/"+room)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	var r io.Reader = conn
	if br != nil {
		r = io.MultiReader(br, conn)
	}
	send := func(v any) error {
		b, _ := json.Marshal(v)
		return gws.WriteFrame(conn, gws.MaskFrameInPlace(gws.NewTextFrame(b)))
	}
	// Read in the background; count our own echoes.
	echoes := make(chan struct{}, 64)
	readErr := make(chan error, 1)
	go func() {
		for {
			//lint:ignore SA1019 the peer is our own server, whose frames are small
			f, err := gws.ReadFrame(r)
			if err != nil {
				readErr <- err
				return
			}
			if f.Header.OpCode == gws.OpClose {
				readErr <- io.EOF
				return
			}
			if f.Header.OpCode == gws.OpText && strings.Contains(string(f.Payload), `"sender":"soak"`) {
				select {
				case echoes <- struct{}{}:
				default:
				}
			}
		}
	}()
	other := fmt.Sprintf("soak-side-%d", rng.IntN(20))
	steps := []any{
		map[string]any{"type": "join", "room": other},
		map[string]any{"text": "hello", "sender": "soak"},
		map[string]any{"text": "there", "sender": "soak", "room": other},
		map[string]any{"type": "leave", "room": other},
	}
	rounds := 1
	if stay {
		rounds = 1 << 30
	}
	for range rounds {
		for _, s := range steps {
			if err := send(s); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		for range 2 {
			select {
			case <-echoes:
			case err := <-readErr:
				return fmt.Errorf("read: %w", err)
			case <-time.After(10 * time.Second):
				return fmt.Errorf("no echo in 10 s")
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case <-time.After(time.Duration(100+rng.IntN(400)) * time.Millisecond):
		case <-ctx.Done():
			return nil
		}
	}
	_ = gws.WriteFrame(conn, gws.MaskFrameInPlace(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, ""))))
	select {
	case <-readErr:
	case <-time.After(5 * time.Second):
	}
	return nil
}

func scrape(t *testing.T, url string, at time.Duration) sample {
	t.Helper()
	// No keep-alive: an idle scrape connection would hold a server goroutine.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	s := sample{at: at}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			s.goroutines = v
		case "process_open_fds":
			s.openFDs = v
		case "process_resident_memory_bytes":
			s.rss = v
		case "scalechat_connections":
			s.connections = v
		case "scalechat_messages_delivered_total":
			s.delivered = v
		}
	}
	return s
}

func median(ss []sample, get func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = get(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func writeCSV(t *testing.T, ss []sample) {
	if *csvOut == "" {
		return
	}
	var b strings.Builder
	b.WriteString("seconds,goroutines,open_fds,rss_bytes,connections,delivered\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "%.0f,%.0f,%.0f,%.0f,%.0f,%.0f\n", s.at.Seconds(), s.goroutines, s.openFDs, s.rss, s.connections, s.delivered)
	}
	if err := os.WriteFile(*csvOut, []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
}
