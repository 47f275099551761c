//go:build linux

// Package servertest runs real scalechat servers on loopback ports for the
// integration tests of its clients: start, stop, restart on the same
// address, and a TCP proxy that can cut every connection it carries, the way
// a dying node behind a load balancer would.
package servertest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/server"
)

// Server is a real scalechat server on a loopback port.
type Server struct {
	t      testing.TB
	tweak  func(*server.Config)
	addr   string
	mu     sync.Mutex
	srv    *server.Server
	cancel context.CancelFunc
	done   chan error // receives what Serve returned, then is nil
}

// Start runs a server on 127.0.0.1 with a free port and the default
// configuration changed by tweak (which may be nil). It is stopped when the
// test ends.
func Start(t testing.TB, tweak func(*server.Config)) *Server {
	t.Helper()
	s := &Server{t: t, tweak: tweak}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) serve(ln net.Listener) {
	s.t.Helper()
	cfg := server.DefaultConfig()
	cfg.Loops = 2
	cfg.ShutdownTimeout = 5 * time.Second
	if s.tweak != nil {
		s.tweak(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		ln.Close()
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	s.mu.Lock()
	s.srv, s.cancel, s.done = srv, cancel, done
	s.mu.Unlock()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URL is the WebSocket URL of path on the server, e.g. URL("/ws").
func (s *Server) URL(path string) string { return "ws://" + s.addr + path }

// HTTPURL is the http URL of path on the server, e.g. HTTPURL("/").
func (s *Server) HTTPURL(path string) string { return "http://" + s.addr + path }

// Server returns the server running now.
func (s *Server) Server() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Stop shuts the server down gracefully (clients get close 1001) and waits
// for it. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			s.t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		s.t.Fatal("server did not stop within 30s")
	}
}

// Restart stops the server and starts a new one, with empty rooms and
// history, on the same address.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.Listen()
}

// Listen starts a new server on the address of a stopped one.
func (s *Server) Listen() {
	s.t.Helper()
	var ln net.Listener
	var err error
	// The port was ours a moment ago; on Linux Go listens with SO_REUSEADDR,
	// so this fails only when another process took the port meanwhile.
	for range 50 {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// Proxy forwards TCP connections to a target address. It can cut every
// connection it carries and refuse new ones, like a load balancer in front
// of a node that dies.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	stallUp   atomic.Bool // discard what clients send
	stallDown atomic.Bool // discard what the server sends

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	refusing bool
	accepted int
}

// NewProxy listens on a free loopback port and forwards to target. It is
// closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the WebSocket URL of path through the proxy.
func (p *Proxy) URL(path string) string { return "ws://" + p.Addr() + path }

// Accepted counts the client connections the proxy has forwarded.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.refusing {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.accepted++
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(c) })
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn, stall *atomic.Bool) {
		buf := make([]byte, 32<<10)
		for {
			// Either side being cut ends the copy, which is how every
			// proxied connection ends here: no error to report.
			n, err := src.Read(buf)
			if n > 0 && !stall.Load() {
				if _, err := dst.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// Whichever side ends, cut both: an abrupt drop, no close handshake.
		dst.Close()
		src.Close()
	}
	wg.Go(func() { pipe(up, c, &p.stallUp) })
	wg.Go(func() { pipe(c, up, &p.stallDown) })
	wg.Wait()
}

// Drop cuts every connection the proxy carries, without a WebSocket close.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Stall makes the proxy discard the bytes clients send (toServer) and the
// bytes the server sends (toClient) while set, without closing anything: a
// connection that silently loses data until it is dropped.
func (p *Proxy) Stall(toServer, toClient bool) {
	p.stallUp.Store(toServer)
	p.stallDown.Store(toClient)
}

// Refuse makes the proxy close new connections at once (refuse=true) or
// forward them again (false).
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	p.refusing = refuse
	p.mu.Unlock()
}

// Close stops the proxy, cuts its connections and waits for its goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Drop()
	p.wg.Wait()
}
