//go:build linux

package loadtest

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/scalechat/scalechat/internal/netpoll"
	"github.com/scalechat/scalechat/internal/ws"
	"golang.org/x/sys/unix"
)

// Connecting: dialing without blocking, the upgrade request, joining the
// client's rooms, and what happens to a client that fails or is lost.

func (l *loop) connectDue(now int64) {
	st := l.st
	for st.next < len(st.clients) && st.inflight < maxInflight {
		due := st.connT0 + int64(float64(st.next)*st.connGap)
		if due > now {
			return
		}
		c := st.clients[st.next]
		st.next++
		st.inflight++
		c.state = csConnecting
		c.startUs, c.dueUs = now, due
		if err := l.connect(c); err != nil {
			l.fail(c, err.Error())
		}
	}
	l.checkSettled()
}

func (l *loop) connect(c *client) error {
	dst := l.tgt.addr
	family := unix.AF_INET
	if dst.Addr().Is6() && !dst.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
			return errors.New("out of file descriptors")
		}
		return fmt.Errorf("socket: %w", err)
	}
	c.fd = int32(fd)
	l.setFD(fd, c)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if c.src >= 0 {
		// Let connect() pick the port per destination, so each source
		// address offers its whole ephemeral range to each server.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(l.srcs[c.src], 0))); err != nil {
			return fmt.Errorf("bind %s: %w", l.srcs[c.src], err)
		}
	}
	if err := unix.Connect(fd, sockaddr(dst)); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		if errors.Is(err, unix.EADDRNOTAVAIL) {
			return errors.New("out of ephemeral ports")
		}
		return fmt.Errorf("connect: %w", err)
	}
	if err := l.poller.Add(fd, netpoll.Writable); err != nil {
		return err
	}
	return nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() || ap.Addr().Is4In6() {
		return &unix.SockaddrInet4{Addr: ap.Addr().Unmap().As4(), Port: int(ap.Port())}
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
}

func (l *loop) setFD(fd int, c *client) {
	if fd >= len(l.fds) {
		n := max(2*len(l.fds), fd+1, 1024)
		fds := make([]*client, n)
		copy(fds, l.fds)
		l.fds = fds
	}
	l.fds[fd] = c
}

func (l *loop) onConnected(c *client) {
	soerr, err := unix.GetsockoptInt(int(c.fd), unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && soerr != 0 {
		err = unix.Errno(soerr)
	}
	if err != nil {
		l.fail(c, "connect: "+err.Error())
		return
	}
	c.state = csHandshake
	c.key = ws.NewClientKey()
	path := l.wire.path(l.tgt, l.st.plan, int(c.rooms[0].room))
	l.wbuf = ws.AppendClientHandshake(l.wbuf[:0], l.tgt.host, path, c.key, ws.Negotiated{Protocol: l.wire.offer(), Extensions: l.extensions})
	if err := l.poller.Mod(int(c.fd), netpoll.Readable); err != nil {
		l.fail(c, err.Error())
		return
	}
	l.write(c, l.wbuf)
}

// fail ends a client that never became ready.
func (l *loop) fail(c *client, reason string) {
	st := l.st
	if c.fd >= 0 {
		l.goodbye(c)
		l.closeFD(c)
	}
	if c.state == csReady || c.state == csClosing || c.state == csClosed || c.state == csFailed {
		return
	}
	if c.state != csIdle {
		st.inflight--
	}
	c.state = csFailed
	c.key = ""
	st.unsettle--
	st.counts.ConnectErrors++
	st.first.keep(firstErrors{conn: reason})
	l.checkSettled()
}

func (l *loop) ready(c *client) {
	st := l.st
	c.state = csReady
	// Connect time counts from the instant the ramp made the connect due,
	// so connects held back by the in-flight cap count as slow too.
	record(l.stepConn, l.clock.now()-c.dueUs)
	st.inflight--
	st.unsettle--
	st.counts.Joined++
	l.aConnected.Add(1)
	l.checkSettled()
}

// lost handles a connection that ended without our close handshake: the
// socket is of no more use, there is nothing to wait for.
func (l *loop) lost(c *client, why string) {
	c.lingerUs = 0
	l.ended(c, why)
}

// ended counts a connection the server ended, or that failed, and closes
// it (closeFD: a client that waits for the server to close TCP keeps its
// socket until then).
func (l *loop) ended(c *client, why string) {
	switch c.state {
	case csClosing:
		l.closeFD(c)
	case csReady:
		l.closeFD(c)
		c.state = csClosed
		l.st.counts.Disconnects++
		l.st.first.keep(firstErrors{conn: why})
	default:
		l.fail(c, why)
	}
}

// closeFD ends c: its state and the step's counts change now; its socket
// closes now, or, while c waits for the server to close TCP
// (awaitServerClose), when the server does or the wait ends.
func (l *loop) closeFD(c *client) {
	if c.fd < 0 {
		return
	}
	if c.lingerUs == 0 {
		l.closeSocket(c)
	}
	switch c.state {
	case csClosing:
		c.state = csClosed
		l.st.open--
		l.aConnected.Add(-1)
		l.checkClosed()
	case csReady:
		c.state = csClosed
		l.aConnected.Add(-1)
	}
}

// forceClose closes c's socket now, whatever it waits for.
func (l *loop) forceClose(c *client) {
	c.lingerUs = 0
	l.closeFD(c)
}

// awaitServerClose keeps c's socket open once its closing handshake is done
// (or its close frame is out after a failure) until the server closes TCP,
// at most until deadline (µs): RFC 6455 section 7.1.1 wants the server to
// close first, so that TIME_WAIT stays on the server and not on the
// generator, which is short of ports. What the server sends meanwhile is
// read and dropped.
func (l *loop) awaitServerClose(c *client, deadline int64) {
	if c.gone() {
		return
	}
	c.lingerUs = deadline
	l.lingering = append(l.lingering, c)
}

// drainLinger reads what comes on a client that waits for the server to
// close TCP, and closes the socket once the server has (or failed).
func (l *loop) drainLinger(c *client) {
	for range 4 {
		n, err := netpoll.Read(int(c.fd), l.scratch)
		switch {
		case err != nil && (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)):
			return
		case err == nil && n > 0:
			continue // the server's last frames: nothing to do with them now
		}
		l.forceClose(c) // EOF: the server closed first
		return
	}
}

// expireLingering closes the sockets of clients whose wait for the server
// to close TCP has ended.
func (l *loop) expireLingering(now int64) {
	kept := l.lingering[:0]
	for _, c := range l.lingering {
		switch {
		case c.fd < 0 || c.lingerUs == 0:
		case now >= c.lingerUs:
			l.forceClose(c)
		default:
			kept = append(kept, c)
		}
	}
	clear(l.lingering[len(kept):])
	l.lingering = kept
}

// closeSocket closes c's socket and lets go of its buffers.
func (l *loop) closeSocket(c *client) {
	fd := int(c.fd)
	unix.Close(fd)
	if fd < len(l.fds) {
		l.fds[fd] = nil
	}
	c.fd = -1
	if c.pend != nil {
		l.putBuf(c.pend)
	}
	c.pend, c.out, c.key = nil, nil, ""
	c.rd.Reset()
	if l.socketClosed != nil {
		l.socketClosed(c)
	}
}

// goodbye sends the close frame (1000) of an upgraded client given up
// before it got into its rooms, so that the server sees a clean close
// rather than 1006, and waits a while for the server to close TCP.
func (l *loop) goodbye(c *client) {
	if c.state != csJoining || c.gone() {
		return
	}
	var fr [16]byte
	if l.write(c, ws.AppendMaskedFrame(fr[:0], ws.OpClose, true, ws.AppendClosePayload(nil, ws.CloseNormal, ""), l.maskKey())) {
		l.awaitServerClose(c, l.clock.now()+closeWaitUs)
	}
}
