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
// It also counts each connection against the connection caps (connSlot).
// It serves TLS and listeners that are not TCP; on a plain TCP listener the
// event loops accept (accept.go) and hand net/http countingConns they made.
type countingListener struct {
	net.Listener
	in, out *atomic.Uint64
	srv     *Server
}

func (l *countingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sl := l.srv.takeSlot(c.RemoteAddr().String())
		if sl == nil {
			c.Close()
			continue
		}
		return &countingConn{Conn: c, in: l.in, out: l.out, slot: sl}, nil
	}
}

type countingConn struct {
	net.Conn
	in, out *atomic.Uint64
	slot    *connSlot
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.Add(uint64(n))
	if n > 0 {
		c.slot.spoke.Store(true)
	}
	if err != nil {
		c.slot.readFailed(err)
	}
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.slot.wrote(b)
	n, err := c.Conn.Write(b)
	c.out.Add(uint64(n))
	return n, err
}

// Close gives back the connection's share of the caps, unless it became a
// WebSocket connection (then its loop does).
func (c *countingConn) Close() error {
	c.slot.release()
	return c.Conn.Close()
}

// SyscallConn gives the upgrade the socket to duplicate.
func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("connection has no file descriptor")
	}
	return sc.SyscallConn()
}

// unread returns the bytes a loop read that net/http has not read yet
// (prefixConn), none for a connection net/http accepted.
func (c *countingConn) unread() []byte {
	if pc, ok := c.Conn.(*prefixConn); ok {
		return pc.unread()
	}
	return nil
}
