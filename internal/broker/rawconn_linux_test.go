//go:build linux

package broker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// rawPair dials a listener on loopback through rawDialer and returns both
// ends: the raw connection and the peer's.
func rawPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		peer <- c
	}()
	c, err := rawDialer(time.Second, false)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := <-peer
	t.Cleanup(func() { p.Close() })
	return c, p
}

// A connection from rawDialer reads and writes as a net.Conn does: the
// bytes both ways (a write larger than the socket's buffer too), a
// deadline as a net.Error timeout, and io.EOF when the peer closes.
func TestRawConn(t *testing.T) {
	c, p := rawPair(t)
	if _, ok := c.(*rawConn); !ok {
		t.Fatalf("the dialer gave a %T", c)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: more than a socket holds
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(p, int64(len(big))))
		got <- b
	}()
	if n, err := c.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not what was written", len(b))
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(make([]byte, 8)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past its deadline: %v, want a timeout", err)
	}
	c.SetReadDeadline(time.Time{})
	p.Write([]byte("+PONG\r\n"))
	buf := make([]byte, 16)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	p.Close()
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("Read after the peer closed: %v, want io.EOF", err)
	}
}

// TLS keeps go-redis's own dialer (nil), which wraps the connection itself.
func TestRawDialerLeavesTLS(t *testing.T) {
	if rawDialer(time.Second, true) != nil {
		t.Fatal("a dialer for TLS")
	}
}

// The pool's check of a connection (a peek through SyscallConn, as go-redis
// makes it) finds an open, quiet connection healthy without being called
// back, and is called back, and sees why, when the peer sent bytes or
// closed.
func TestRawConnPeek(t *testing.T) {
	c, p := rawPair(t)
	check := func() (called bool, n int) {
		rc, err := c.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Read(func(fd uintptr) bool {
			called = true
			var b [1]byte
			n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return called, n
	}
	if called, _ := check(); called {
		t.Fatal("an open, quiet connection: go-redis's check was called back")
	}
	p.Write([]byte("x"))
	deadline := time.Now().Add(2 * time.Second)
	for called, n := check(); !called || n != 1; called, n = check() {
		if time.Now().After(deadline) {
			t.Fatalf("a byte waits: called %v, peeked %d", called, n)
		}
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	p.Close()
	for called, n := check(); !called || n != 0; called, n = check() {
		if time.Now().After(deadline) {
			t.Fatalf("the peer closed: called %v, peeked %d", called, n)
		}
	}
}
