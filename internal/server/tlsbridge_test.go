//go:build linux

package server

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/scalechat/scalechat/internal/protocol"
)

// An idle wss:// connection holds little heap: its bridge's copy buffers are
// bridgeBuffer each, not io.Copy's 32 KiB (docs/benchmarks-log.md, "TLS"). The
// figure counts both ends, the test's TLS clients included: 88 KiB with
// io.Copy, 26–29 KiB with bridgeBuffer (2026-11-25, a loaded 2-core VM).
// SCALECHAT_TLS_PROFILE=DIR also writes the heap and goroutine profiles.
func TestTLSIdleHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 300 TLS connections")
	}
	cfg, pool := selfSigned(t)
	ts := startServer(t, func(c *Config) { c.TLS = cfg; c.MaxConnsPerIP = 0 })
	d := gws.Dialer{Timeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: pool}, Protocols: []string{protocol.Subprotocol}}
	const n = 300
	before := heapInUse()
	conns := make([]net.Conn, 0, n)
	for range n {
		conn, br, _, err := d.Dial(context.Background(), "wss://"+ts.addr+"/ws/idle")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// The joined frame came through the bridge: both goroutines run.
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var rw io.ReadWriter = conn
		if br != nil { // the frame came with the handshake
			rw = struct {
				io.Reader
				io.Writer
			}{br, conn}
		}
		if _, err := wsutil.ReadServerText(rw); err != nil {
			t.Fatalf("first frame: %v", err)
		}
		conns = append(conns, conn)
	}
	perConn := float64(heapInUse()-before) / n / 1024
	t.Logf("heap per idle TLS connection, both ends: %.1f KiB", perConn)
	if perConn > 40 {
		t.Errorf("idle TLS connection holds %.1f KiB of heap, want at most 40", perConn)
	}
	if dir := os.Getenv("SCALECHAT_TLS_PROFILE"); dir != "" {
		for _, p := range []string{"heap", "goroutine"} {
			f, err := os.Create(dir + "/" + p + ".pb.gz")
			if err != nil {
				t.Fatal(err)
			}
			if err := pprof.Lookup(p).WriteTo(f, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	runtime.KeepAlive(conns)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
