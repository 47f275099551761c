//go:build linux

package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/fivefield"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/server/servertest"
)

func testConfig(url string) Config {
	return Config{URL: url, Rooms: 3, RoomSize: 4, Interval: 50 * time.Millisecond, Duration: 2 * time.Second,
		Drain: 3 * time.Second, Reconnect: 20 * time.Millisecond, Seed: 1}
}

func run(t *testing.T, cfg Config) *results.Audit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteSummary(&b, res)
	t.Log(b.String())
	return res
}

func TestSingleNodeHoldsEveryGuarantee(t *testing.T) {
	srv := servertest.Start(t, nil)
	res := run(t, testConfig(srv.URL("/ws")))
	if res.Broken || res.Expected == 0 || res.Delivered != res.Expected || res.Sent == 0 {
		t.Fatalf("result %+v", res)
	}
	// 12 clients, each owed every message of its room of 4.
	if res.Expected != 4*res.Sent || res.UnconfirmedSends != 0 {
		t.Errorf("expected %d deliveries, want 4 × %d sent (%d unconfirmed)", res.Expected, res.Sent, res.UnconfirmedSends)
	}
}

// A message the server refuses with an error frame (here: over the rate
// limit) is a refused send, not a loss: the sender was told.
func TestRefusedSendsAreNotLosses(t *testing.T) {
	srv := servertest.Start(t, func(c *server.Config) { c.RateLimit, c.RateBurst, c.RateAbuse = 5, 5, 1<<20 })
	res := run(t, testConfig(srv.URL("/ws")))
	if res.Broken || res.RefusedSends == 0 || res.LostSends != 0 || res.Sent != res.RefusedSends+res.Delivered/4 {
		t.Fatalf("result %+v", res)
	}
}

// Cut connections resume exactly: nothing missing, nothing twice.
func TestDroppedConnectionsResumeExactly(t *testing.T) {
	srv := servertest.Start(t, nil)
	cfg := testConfig(srv.URL("/ws"))
	cfg.DropEvery = 150 * time.Millisecond
	res := run(t, cfg)
	if res.Broken || len(res.Faults) < 5 || res.Missing != 0 || res.Duplicates != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, f := range res.Faults {
		if !f.RecoveredOK || f.Recovered <= 0 {
			t.Errorf("fault %+v", f)
		}
	}
}

// A server restarted mid-run starts its rooms anew (memory only): each
// client is told so (history_gap with reset) and what it missed of the old
// stream counts as flagged, not missing.
func TestServerRestartIsFlagged(t *testing.T) {
	srv := servertest.Start(t, nil)
	cfg := testConfig(srv.URL("/ws"))
	cfg.Duration = 3 * time.Second
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(1500 * time.Millisecond) // mid-run, by the audit's clock: no signal to wait for
		srv.Restart()
	})
	res := run(t, cfg)
	wg.Wait()
	if res.Broken || res.NewStreams != 12 || res.Missing != 0 || res.Duplicates != 0 {
		t.Fatalf("result %+v", res)
	}
}

// The audit catches a server that loses or repeats one message in N: a
// proxy between the clients and a real server drops, or sends twice, every
// Nth chat frame on its way to a client.
func TestPlantedFaultsAreCaught(t *testing.T) {
	srv := servertest.Start(t, nil)
	for _, tt := range []struct {
		name string
		mode plant
		want func(*results.Audit) bool
	}{
		{"drop one in 50", plantDrop, func(r *results.Audit) bool { return r.Missing > 0 && r.Duplicates == 0 }},
		{"duplicate one in 50", plantDuplicate, func(r *results.Audit) bool { return r.Duplicates > 0 && r.Missing == 0 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := startPlant(t, srv.Addr(), tt.mode, 50)
			res := run(t, testConfig("ws://"+p.addr+"/ws"))
			// No fault was injected: everything counts before the faults.
			if !res.Broken || !tt.want(res) || p.planted.Load() == 0 || res.Missing+res.Duplicates != p.planted.Load() ||
				res.BeforeFaults.Missing+res.BeforeFaults.Duplicates != p.planted.Load() {
				t.Fatalf("planted %d; result %+v", p.planted.Load(), res)
			}
		})
	}
}

// startFiveField serves the five-field reference server on loopback.
func startFiveField(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := fivefield.New()
	srv := &http.Server{Handler: s}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return ln.Addr().String()
}

// The five-field protocol cannot resume: what a client misses while away
// is reported, not counted as a broken guarantee; a frame lost on a
// connection that stayed up is. Without faults, every message reaches
// every client of its room, its sender included: the audit's messages
// carry the room the server routes by.
func TestLegacyProtocolAgainstFiveFieldServer(t *testing.T) {
	addr := startFiveField(t)
	cfg := testConfig("ws://" + addr + "/ws")
	cfg.Protocol = ProtocolLegacy
	res := run(t, cfg)
	if res.Broken || res.Sent == 0 || res.Expected != res.Sent*int64(cfg.RoomSize) || res.Delivered != res.Expected ||
		res.MissedAway != 0 || res.LostSends != 0 || res.Foreign != 0 {
		t.Fatalf("without faults: result %+v", res)
	}
	cfg.DropEvery = 150 * time.Millisecond
	res = run(t, cfg)
	if res.Broken || res.MissedAway == 0 || res.Missing != 0 || res.Delivered+res.MissedAway != res.Expected || len(res.Faults) < 5 {
		t.Fatalf("result %+v", res)
	}
	p := startPlant(t, addr, plantDrop, 50)
	cfg = testConfig("ws://" + p.addr + "/ws")
	cfg.Protocol = ProtocolLegacy
	res = run(t, cfg)
	if !res.Broken || res.Missing != p.planted.Load() || res.Missing == 0 {
		t.Fatalf("planted %d; result %+v", p.planted.Load(), res)
	}
}

type plant int

const (
	plantDrop plant = iota
	plantDuplicate
)

// plantProxy forwards TCP connections to a server and plants a fault in
// every Nth chat frame the server sends.
type plantProxy struct {
	addr    string
	target  string
	mode    plant
	every   int64
	frames  atomic.Int64
	planted atomic.Int64
}

func startPlant(t *testing.T, target string, mode plant, every int64) *plantProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &plantProxy{addr: ln.Addr().String(), target: target, mode: mode, every: every}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { io.Copy(s, c); s.Close() })
			wg.Go(func() { p.down(c, s); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// down copies the server's upgrade answer, then its frames one by one.
func (p *plantProxy) down(c, s net.Conn) {
	br := bufio.NewReader(s)
	for {
		line, err := br.ReadBytes('\n')
		if _, werr := c.Write(line); err != nil || werr != nil {
			return
		}
		if string(line) == "\r\n" {
			break
		}
	}
	for {
		var h [10]byte
		if _, err := io.ReadFull(br, h[:2]); err != nil {
			return
		}
		hn, n := 2, uint64(h[1]&0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(br, h[2:4]); err != nil {
				return
			}
			hn, n = 4, uint64(binary.BigEndian.Uint16(h[2:4]))
		case 127:
			if _, err := io.ReadFull(br, h[2:10]); err != nil {
				return
			}
			hn, n = 10, binary.BigEndian.Uint64(h[2:10])
		}
		frame := make([]byte, hn+int(n))
		copy(frame, h[:hn])
		if _, err := io.ReadFull(br, frame[hn:]); err != nil {
			return
		}
		copies := 1
		if h[0]&0x0f == 1 && bytes.Contains(frame, []byte(`"message_id"`)) && !bytes.Contains(frame, []byte(`"type"`)) &&
			p.frames.Add(1)%p.every == 0 {
			p.planted.Add(1)
			copies = map[plant]int{plantDrop: 0, plantDuplicate: 2}[p.mode]
		}
		for range copies {
			if _, err := c.Write(frame); err != nil {
				return
			}
		}
	}
}
