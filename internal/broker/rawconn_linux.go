//go:build linux

package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/netpoll"
)

// rawDialer returns go-redis's dialer for plain TCP: its connections read
// and write with raw system calls (netpoll.Read, netpoll.Write) and wait
// in Go's poller, where net.Conn's reads and writes go through the
// scheduler's entersyscall. Each of those wakes Go's sysmon when it sleeps,
// and a woken sysmon polls every 20 µs for a millisecond: at a few
// thousand Redis round trips a second, that was a sixth to a quarter of a
// cluster node's CPU in nanosleep and context switches
// (docs/benchmarks-log.md). A raw call on a non-blocking socket never blocks,
// so the scheduler need not know of it. nil (go-redis's own dialer) for
// TLS, which has its own reads.
func rawDialer(timeout time.Duration, tls bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if tls {
		return nil
	}
	d := &net.Dialer{Timeout: timeout, KeepAlive: 5 * time.Minute} // go-redis's own settings
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			return c, nil // a unix socket: as it is
		}
		rc, err := tc.SyscallConn()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("redis connection to %s: %w", addr, err)
		}
		return &rawConn{TCPConn: tc, rc: rc}, nil
	}
}

// rawConn is a TCP connection whose Read and Write are raw system calls;
// deadlines, Close and the rest are the TCPConn's (the waits in Go's poller
// honour its deadlines).
type rawConn struct {
	*net.TCPConn
	rc syscall.RawConn
}

// Read reads what is there, waiting in Go's poller while nothing is.
func (c *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if werr := c.rc.Read(func(fd uintptr) bool {
		for {
			n, err = netpoll.Read(int(fd), b)
			if !errors.Is(err, unix.EINTR) {
				return !errors.Is(err, unix.EAGAIN)
			}
		}
	}); werr != nil {
		return 0, c.opError("read", werr)
	}
	if err != nil {
		return 0, c.opError("read", os.NewSyscallError("read", err))
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of b, waiting in Go's poller while the socket is full.
func (c *rawConn) Write(b []byte) (int, error) {
	written := 0
	var err error
	if werr := c.rc.Write(func(fd uintptr) bool {
		for written < len(b) {
			n, e := netpoll.Write(int(fd), b[written:])
			switch {
			case errors.Is(e, unix.EINTR):
			case errors.Is(e, unix.EAGAIN):
				return false
			case e != nil:
				err = e
				return true
			default:
				written += n
			}
		}
		return true
	}); werr != nil {
		return written, c.opError("write", werr)
	}
	if err != nil {
		return written, c.opError("write", os.NewSyscallError("write", err))
	}
	return written, nil
}

// opError wraps err as net.Conn's own errors are, so that go-redis tells a
// timeout (net.Error) and a broken connection apart as it does for them.
func (c *rawConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// SyscallConn is what go-redis's pool reads to check a connection before
// each use (a one-byte MSG_PEEK recvfrom, through syscall.Recvfrom and so
// entersyscall: once a pipeline, it woke sysmon as often as the reads did).
// The peek is made here as a raw call first; only when it finds something
// (the peer closed, bytes nobody asked for, an error) does go-redis's own
// check run, and see the same.
func (c *rawConn) SyscallConn() (syscall.RawConn, error) {
	return peekingRawConn{c.rc}, nil
}

// peekingRawConn answers a Read whose peek would find the socket empty and
// open without calling it back: the answer go-redis's check gives then.
type peekingRawConn struct{ syscall.RawConn }

func (r peekingRawConn) Read(f func(fd uintptr) bool) error {
	healthy := false
	if err := r.Control(func(fd uintptr) {
		var b [1]byte
		_, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		healthy = errno == unix.EAGAIN
	}); err != nil {
		return err
	}
	if healthy {
		return nil
	}
	return r.RawConn.Read(f)
}
