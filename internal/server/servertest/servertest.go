//go:build linux

// Package servertest runs real scalechat servers in the test's process, on
// loopback ports, for the integration tests of the server's clients and
// tools: start, stop, and restart on the same address. (The server's own
// tests have their helpers inside package server.)
package servertest

import (
	"context"
	"net"
	"sync"
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
