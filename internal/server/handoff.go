//go:build linux

package server

import (
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
)

// handoffListener is the net.Listener net/http serves when the event loops
// accept the connections (accept.go): a loop that reads a request that is
// not a WebSocket upgrade it answers itself (the page, the API, long polls,
// /healthz, an upgrade whose admission may block) hands the connection
// here, with the bytes it already read. push never blocks, so a loop never
// waits for net/http.
type handoffListener struct {
	addr  net.Addr
	ready chan struct{} // a connection was queued; capacity 1

	mu     sync.Mutex
	queue  []net.Conn
	closed bool
	done   chan struct{} // closed by Close
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ready: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues c for Accept; after Close it closes c instead.
func (l *handoffListener) push(c net.Conn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		c.Close()
		return
	}
	l.queue = append(l.queue, c)
	l.mu.Unlock()
	select {
	case l.ready <- struct{}{}:
	default: // a wake-up is pending: Accept takes every queued connection
	}
}

// Accept returns the next connection a loop handed over.
func (l *handoffListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, net.ErrClosed
		}
		if len(l.queue) > 0 {
			c := l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
			if len(l.queue) == 0 {
				l.queue = nil
			}
			l.mu.Unlock()
			return c, nil
		}
		l.mu.Unlock()
		select {
		case <-l.ready:
		case <-l.done:
		}
	}
}

// Close stops Accept and closes the connections still queued. The socket
// the loops accept on is closed by the server (Server.unlisten).
func (l *handoffListener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	queued := l.queue
	l.queue = nil
	l.mu.Unlock()
	close(l.done)
	for _, c := range queued {
		c.Close()
	}
	return nil
}

// Addr is the address the loops accept on.
func (l *handoffListener) Addr() net.Addr { return l.addr }

// prefixConn is a connection whose first reads return bytes already read
// from its socket (by the loop that looked at the request).
type prefixConn struct {
	net.Conn
	prefix []byte
}

// socketConn makes a net.Conn of a socket a loop accepted, replaying
// prefix. The descriptor is taken over: closed here, the net.Conn holds a
// duplicate registered with Go's poller. The caller must have removed fd
// from its epoll instance first: the duplicate keeps the socket alive, and
// with it the old registration.
func socketConn(fd int, prefix []byte) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "accepted")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("hand the connection to net/http: %w", err)
	}
	return &prefixConn{Conn: nc, prefix: prefix}, nil
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		if len(c.prefix) == 0 {
			c.prefix = nil
		}
		return n, nil
	}
	return c.Conn.Read(b)
}

// unread returns the bytes of the prefix net/http has not read yet (a
// request with more bytes behind it than its buffer took), for an upgrade
// that hijacks the connection: they are the client's first frames.
func (c *prefixConn) unread() []byte {
	p := c.prefix
	c.prefix = nil
	return p
}

// SyscallConn gives the upgrade the socket to duplicate.
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%T has no file descriptor", c.Conn)
	}
	return sc.SyscallConn()
}
