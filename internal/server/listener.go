//go:build linux

package server

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
)

// countingListener counts the bytes of HTTP connections (requests and
// answers, WebSocket handshakes, polls). After an upgrade the event loop
// owns a duplicate of the socket and counts the WebSocket traffic itself.
type countingListener struct {
	net.Listener
	in, out *atomic.Uint64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.in.Add(uint64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.l.out.Add(uint64(n))
	return n, err
}

// SyscallConn gives the upgrade the socket to duplicate.
func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("connection has no file descriptor")
	}
	return sc.SyscallConn()
}
