//go:build linux

package server

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/netpoll"
	"github.com/scalechat/scalechat/internal/ws"
)

// Connections accepted on the event loops. On a plain TCP listener every
// loop watches the listening socket (EPOLLEXCLUSIVE: a connection wakes one
// loop, or a few), accepts, and reads the request on the loop: a WebSocket
// upgrade to /ws, /ws/{room} or /echo is checked (upgrade.go's prepare,
// the same checks as net/http's handler), answered (101 or the refusal) and
// becomes a connection of that loop, with no goroutine, no bufio buffer,
// no second registration with Go's poller and no dup of the socket. Any
// other request (the page, the API, long polls, /healthz) and any upgrade
// in an unusual form is handed to net/http on the same port with the bytes
// already read (handoff.go): that path is today's, unchanged. TLS keeps
// net/http's accept (countingListener).
//
// A request's head is bounded like net/http's: at most maxHeadBytes, else
// 431; it must arrive within --handshake-timeout of the accept, else the
// connection is cut and counted (refusal handshake_timeout). Handshakes
// wait in a queue in the order of their deadlines, which is the order they
// were accepted in, since every one gets the same timeout: the loop looks
// at the head of it only.

const (
	acceptsPerEvent = 64 // then let the loop's connections have their turn
	// maxHeadBytes is net/http's bound on a request line and headers
	// (http.Server.MaxHeaderBytes, plus the 4096 bytes it adds as slack).
	maxHeadBytes = 16<<10 + 4096
	// acceptPause is how long a loop stops accepting after the process ran
	// out of file descriptors (the socket stays readable, level-triggered).
	acceptPause = 50 * time.Millisecond
)

// handshake is an accepted connection whose request a loop is reading.
type handshake struct {
	fd       int
	slot     *connSlot
	buf      []byte // the request so far, when one read did not hold it all
	scanned  int    // bytes of buf searched for the head's end already
	deadline int64  // unix nanoseconds
	done     bool   // answered, handed off or cut: its queue entry is stale
}

// admitBlocks reports whether admitting an upgrade may block: a check that
// waits for something outside the process (a connect hook that asks the
// application's backend). A loop must never block, so it then hands every
// upgrade to net/http, whose goroutine per request may wait, exactly as on
// the TLS path. It is true when the server has a connect or a join hook
// (admitHooks, which the net/http path calls after prepare; a join hook may
// apply to the URL's room), and when a test sets blockingAdmission.
func (s *Server) admitBlocks() bool {
	return s.blockingAdmission || s.hooks.On(hooks.Connect) || s.hooks.On(hooks.Join)
}

// listenOnLoops makes the loops accept on ln's socket, when ln is a plain
// TCP listener: it duplicates the socket, closes ln (the duplicate keeps
// it listening, out of Go's poller) and returns the listener net/http
// serves then. It returns ln itself when the loops cannot accept on it.
func (s *Server) listenOnLoops(ln net.Listener) (net.Listener, error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok || s.cfg.TLS != nil {
		return ln, nil
	}
	fd, err := dupNonblock(tl)
	if err != nil {
		return nil, fmt.Errorf("listening socket: %w", err)
	}
	for _, l := range s.loops {
		if err := l.poller.AddListener(fd); err != nil {
			for _, l := range s.loops {
				_ = l.poller.Del(fd)
				l.listening = false
			}
			unix.Close(fd)
			return nil, err
		}
		l.listening, l.lfd = true, fd
	}
	s.lfd = fd
	s.handoff = newHandoffListener(ln.Addr())
	if err := ln.Close(); err != nil { // the duplicate listens on: serve anyway
		s.log.Warn("close the listener the loops took over", "err", err)
	}
	return s.handoff, nil
}

// unlisten stops the loops accepting and closes the listening socket, so
// that new connections are refused: each loop removes the socket from its
// poller, and the socket is closed once every loop has (a descriptor
// closed under a loop could be reused by the next accept). A loop that
// does not answer before wait is closed leaves the socket open until Serve
// returns.
func (s *Server) unlisten(wait <-chan struct{}) {
	if s.lfd < 0 {
		return
	}
	acks := make([]chan struct{}, len(s.loops))
	for i, l := range s.loops {
		acks[i] = make(chan struct{})
		l.command(command{kind: cmdUnlisten, ack: acks[i]})
	}
	for _, ack := range acks {
		select {
		case <-ack:
		case <-wait:
			return
		}
	}
	s.closeListener()
}

// closeListener closes the socket the loops accepted on, once. Only
// Serve's goroutine calls it (shutdown too runs there).
func (s *Server) closeListener() {
	if s.lfd >= 0 {
		unix.Close(s.lfd)
		s.lfd = -1
	}
}

// onOther handles an event for a descriptor that is not a connection: the
// listening socket or a handshake.
func (l *loop) onOther(ev netpoll.Event) {
	if l.listening && ev.FD == l.lfd {
		l.accept()
		return
	}
	if h := l.shakes[ev.FD]; h != nil {
		l.readHandshake(h)
	}
}

// accept takes the connections waiting on the listening socket.
func (l *loop) accept() {
	s := l.srv
	for range acceptsPerEvent {
		fd, sa, err := unix.Accept4(l.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			switch {
			case errors.Is(err, unix.EAGAIN):
			case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
				continue
			case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ENOMEM):
				l.pauseAccept(err)
			default: // logged by pauseAccept, at most once a second
				l.pauseAccept(err)
			}
			return
		}
		sl := s.takeSlot(sockaddrString(sa))
		if sl == nil {
			unix.Close(fd)
			continue
		}
		// Round robin, as net/http's upgrades are placed: the loop the
		// kernel woke is not the one to load.
		if t := s.loops[int(s.next.Add(1))%len(s.loops)]; t != l {
			t.command(command{kind: cmdHandshake, fd: fd, slot: sl})
			continue
		}
		l.startHandshake(fd, sl)
	}
}

// startHandshake watches an accepted connection for its request.
func (l *loop) startHandshake(fd int, sl *connSlot) *handshake {
	if err := l.poller.Add(fd, netpoll.Readable); err != nil {
		l.srv.log.Error("register connection", "err", err)
		unix.Close(fd)
		sl.release()
		return nil
	}
	h := &handshake{fd: fd, slot: sl, deadline: l.nowNano + int64(l.srv.cfg.HandshakeTimeout)}
	l.shakes[fd] = h
	l.shakeq = append(l.shakeq, h)
	return h
}

// takeHandshake is cmdHandshake: a connection another loop accepted for
// this one. Its request has often arrived meanwhile: it is read at once.
func (l *loop) takeHandshake(fd int, sl *connSlot) {
	if h := l.startHandshake(fd, sl); h != nil {
		l.readHandshake(h)
	}
}

// pauseAccept stops accepting for acceptPause: the socket stays readable
// while the process has no descriptor to spare, and a level-triggered loop
// would spin on it.
func (l *loop) pauseAccept(err error) {
	if l.poller.Del(l.lfd) != nil {
		return
	}
	l.listening = false
	l.acceptAt = l.nowNano + int64(acceptPause)
	if l.nowNano-l.acceptLogged >= int64(time.Second) {
		l.acceptLogged = l.nowNano
		l.srv.log.Warn("accept failed: paused", "loop", l.id, "pause", acceptPause, "err", err)
	}
}

// resumeAccept watches the listening socket again after a pause.
func (l *loop) resumeAccept() {
	l.acceptAt = 0
	if l.unlistened {
		return
	}
	if err := l.poller.AddListener(l.lfd); err != nil {
		l.srv.log.Error("watch the listening socket", "loop", l.id, "err", err)
		return
	}
	l.listening = true
}

// stopAccepting is cmdUnlisten: the loop accepts no more connections.
func (l *loop) stopAccepting(ack chan struct{}) {
	if l.listening {
		_ = l.poller.Del(l.lfd)
	}
	l.listening, l.unlistened, l.acceptAt = false, true, 0
	close(ack)
}

func sockaddrString(sa unix.Sockaddr) string {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)).String()
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port)).String()
	}
	return ""
}

// readHandshake reads what a handshaking connection sent and acts once
// the request tells what it is.
func (l *loop) readHandshake(h *handshake) {
	n, err := netpoll.Read(h.fd, l.readBuf)
	if n <= 0 {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return
		}
		l.dropHandshake(h) // EOF or reset before the request ended
		return
	}
	data := l.readBuf[:n]
	if len(h.buf) > 0 {
		h.buf = append(h.buf, data...)
		data = h.buf
	}
	kind, end := l.classify(data, h.scanned)
	switch kind {
	case headWait:
		if len(data) > maxHeadBytes {
			l.refuseHeaderSize(h)
			return
		}
		if len(h.buf) == 0 {
			h.buf = append(make([]byte, 0, 2*len(data)), data...)
		}
		h.scanned = len(data) // a head sent a byte at a time is searched once, not once a byte
	case headOther:
		l.handOff(h, bytes.Clone(data))
	case headUpgrade:
		l.upgrade(h, data, end)
	}
}

type headKind uint8

const (
	headWait    headKind = iota // more bytes are needed to tell
	headOther                   // not for the loop: net/http answers it
	headUpgrade                 // a complete head of a GET to /ws or /echo
)

// classify tells from the first bytes of a request whether the loop may
// answer it: a GET to /ws… or /echo… whose head is complete; it then
// returns the head's length too. A request that is not such a GET is known
// as soon as its first bytes differ. The first scanned bytes of data were
// searched for the head's end before.
func (l *loop) classify(data []byte, scanned int) (headKind, int) {
	if !hasPrefixOrIs(data, "GET /ws") && !(l.srv.cfg.EchoEndpoint && hasPrefixOrIs(data, "GET /echo")) {
		return headOther, 0
	}
	if len(data) < len("GET /ws") {
		return headWait, 0
	}
	end := headEnd(data, scanned)
	if end < 0 {
		return headWait, 0
	}
	return headUpgrade, end
}

// hasPrefixOrIs reports whether data begins with p, or is a beginning of p.
func hasPrefixOrIs(data []byte, p string) bool {
	n := min(len(data), len(p))
	return string(data[:n]) == p[:n]
}

// headEnd returns the length of the request's head (through the blank line
// that ends it), or -1 while it is incomplete. A line may end in LF alone,
// as net/http accepts. The first from bytes hold no end: the search starts
// at the last line end they may hold the beginning of (LF, CR LF: two
// bytes back at most).
func headEnd(data []byte, from int) int {
	for i := max(from-2, 0); ; {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(data) && data[i] == '\n':
			return i + 1
		case i+1 < len(data) && data[i] == '\r' && data[i+1] == '\n':
			return i + 2
		case i >= len(data)-1:
			return -1
		}
	}
}

// upgrade answers a complete upgrade head on the loop: the same checks and
// answers as net/http's handler, then the connection joins this loop. The
// bytes after the head (a first frame sent with the request) are its first
// input. An upgrade in a form the loop does not take (see loopRoute) goes
// to net/http.
func (l *loop) upgrade(h *handshake, data []byte, end int) {
	s := l.srv
	if s.admitBlocks() {
		l.handOff(h, bytes.Clone(data))
		return
	}
	r := &l.view
	if !r.parse(data[:end]) {
		l.handOff(h, bytes.Clone(data)) // net/http answers it as it does today
		return
	}
	name, ok := s.loopRoute(r)
	if !ok {
		l.handOff(h, bytes.Clone(data))
		return
	}
	r.remoteAddr = h.slot.remote
	h.slot.served.Store(true)
	ref := h.slot.admitRequest()
	if ref != nil {
		ref.header = [2]string{"Retry-After", "1"}
	}
	var cmd command
	var u upgradeRequest
	if ref == nil {
		cmd, u, ref = s.prepare(r, name, h.slot)
	}
	key := u.key
	s.httpBytesIn.Add(uint64(len(data)))
	if ref != nil {
		l.refuse(h, r, ref)
		return
	}
	// Go's accepted connections have Nagle's algorithm off; so must ours,
	// or a frame written behind another waits for the client's ACK. (A
	// socket that is not TCP, a benchmark's socket pair, has no Nagle.)
	if err := unix.SetsockoptInt(h.fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil &&
		!errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOPROTOOPT) {
		s.releaseAdmission(&cmd)
		s.refusedConn(RefuseInternal, 0, r.remoteAddr, r.path, "set TCP_NODELAY: "+err.Error())
		l.closeHandshake(h)
		return
	}
	l.forget(h)
	cmd.id = s.accepted.Add(1)
	s.acceptedOnLoop.Add(1)
	cmd.fd, cmd.registered = h.fd, true
	if rest := data[end:]; len(rest) > 0 {
		cmd.pending = bytes.Clone(rest)
	}
	// The connection joins first, so that the 101 can go out in one TCP
	// segment with what the join queued (joined, the history): adding
	// only queues frames, the loop writes them at the end of this
	// iteration, and the 101 is written before that.
	l.add(cmd)
	c := l.conns[cmd.fd]
	if c == nil || c.state == stateClosed {
		return
	}
	l.answer = appendSwitching(l.answer[:0], key, cmd.deflate, cmd.control)
	if err := writeAnswer(c.fd, l.answer, c.dirty); err != nil {
		l.srv.log.Debug("upgrade", "err", err)
		c.closeCode = ws.CloseAbnormal
		c.leaveAll()
		l.closeFD(c)
		return
	}
	s.httpBytesOut.Add(uint64(len(l.answer)))
}

// loopRoute returns the room a request upgrades to ("" for /echo), when it
// is one the loop answers: a GET with a Host (that it has only one is
// the parser's to tell: see upgradeView.parse), an Upgrade header naming
// websocket and no body, to /ws, /ws/{room} or /echo, in
// the form net/http's mux routes to the upgrade handlers without a
// redirect. Anything else goes to net/http, which answers it as before
// (a 426 to a GET without the Upgrade header, a 400 to a bad path, ...).
func (s *Server) loopRoute(r *upgradeView) (string, bool) {
	if r.method != http.MethodGet || r.host == "" || r.body || !headerHasToken(r.upgrade, "websocket") {
		return "", false
	}
	p := r.escapedPath
	switch {
	case p == "/ws":
		return "lobby", true
	case p == "/echo":
		return "", s.cfg.EchoEndpoint
	case strings.HasPrefix(p, "/ws/"):
		seg := p[len("/ws/"):]
		if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, "/") {
			return "", false
		}
		name, err := url.PathUnescape(seg)
		if err != nil || name == "" {
			return "", false
		}
		return name, true
	}
	return "", false
}

// writeAnswer writes the 101 to a new non-blocking socket: an answer of a
// few hundred bytes fits its empty send buffer, so a short write means the
// socket failed. With more set, frames follow in this loop iteration: the
// kernel holds the answer (MSG_MORE) until their write, for one segment.
func writeAnswer(fd int, b []byte, more bool) error {
	flags := 0
	if more {
		flags = unix.MSG_MORE
	}
	for {
		n, err := unix.SendmsgN(fd, b, nil, nil, flags|unix.MSG_NOSIGNAL)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write the answer to the upgrade: %w", err)
		}
		if n < len(b) {
			return fmt.Errorf("write the answer to the upgrade: %d of %d bytes written", n, len(b))
		}
		return nil
	}
}

// refuse answers a refused upgrade as net/http's http.Error does, counts
// and logs it (as Server.refuse), and closes the connection: a refused
// client reconnects rather than reuse it.
func (l *loop) refuse(h *handshake, r *upgradeView, ref *refusal) {
	s := l.srv
	s.refusedConn(ref.reason, ref.status, h.slot.remote, r.path, ref.msg)
	b := fmt.Appendf(l.answer[:0], "HTTP/1.1 %d %s\r\n", ref.status, http.StatusText(ref.status))
	if ref.header[0] != "" {
		b = fmt.Appendf(b, "%s: %s\r\n", ref.header[0], ref.header[1])
	}
	b = fmt.Appendf(b, "Connection: close\r\nContent-Length: %d\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Date: %s\r\nX-Content-Type-Options: nosniff\r\n\r\n%s\n",
		len(ref.msg)+1, time.Now().UTC().Format(http.TimeFormat), ref.msg)
	l.answer = b
	l.answerAndClose(h, b)
}

// refuseHeaderSize answers a head over maxHeadBytes with net/http's own
// answer, counted as net/http's are (connSlot.wrote).
func (l *loop) refuseHeaderSize(h *handshake) {
	const msg = "431 Request Header Fields Too Large"
	s := l.srv
	s.refusedConn(RefuseHeaderSize, http.StatusRequestHeaderFieldsTooLarge, h.slot.remote, "", msg)
	s.httpBytesIn.Add(uint64(len(h.buf)))
	l.answerAndClose(h, []byte("HTTP/1.1 "+msg+"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"+msg))
}

// answerAndClose writes a refusal (best effort: the client may be gone)
// and closes the connection. Its slot is given back first: a client that
// read the answer finds its address's count without it.
func (l *loop) answerAndClose(h *handshake, b []byte) {
	l.forget(h)
	h.slot.release()
	if n, err := netpoll.Write(h.fd, b); err == nil {
		l.srv.httpBytesOut.Add(uint64(n))
	}
	unix.Close(h.fd)
}

// handOff gives a connection whose request is not the loop's to net/http,
// with the bytes read so far (prefix, owned by the callee).
func (l *loop) handOff(h *handshake, prefix []byte) {
	s := l.srv
	l.forget(h)
	if err := l.poller.Del(h.fd); err != nil {
		s.log.Error("hand a connection to net/http", "err", err)
		unix.Close(h.fd)
		h.slot.release()
		return
	}
	nc, err := socketConn(h.fd, prefix)
	if err != nil {
		s.log.Error("hand a connection to net/http", "err", err)
		h.slot.release()
		return
	}
	// net/http reads the prefix again through countingConn: the bytes
	// are counted there.
	s.handoff.push(&countingConn{Conn: nc, in: &s.httpBytesIn, out: &s.httpBytesOut, slot: h.slot})
}

// forget takes h out of the loop's handshakes; its queue entry is skipped.
func (l *loop) forget(h *handshake) {
	h.done = true
	h.buf = nil
	delete(l.shakes, h.fd)
}

// closeHandshake closes a handshaking connection and gives its slot back.
func (l *loop) closeHandshake(h *handshake) {
	l.forget(h)
	unix.Close(h.fd)
	h.slot.release()
}

// dropHandshake closes a connection whose client left before its request
// ended, counting its bytes.
func (l *loop) dropHandshake(h *handshake) {
	l.srv.httpBytesIn.Add(uint64(len(h.buf)))
	l.closeHandshake(h)
}

// expireHandshakes cuts the handshakes whose request did not arrive within
// --handshake-timeout, as net/http's ReadHeaderTimeout does: closed
// unanswered, counted.
func (l *loop) expireHandshakes() {
	s := l.srv
	for len(l.shakeq) > 0 {
		h := l.shakeq[0]
		if !h.done && h.deadline > l.nowNano {
			break
		}
		l.shakeq[0] = nil
		l.shakeq = l.shakeq[1:]
		if h.done {
			continue
		}
		s.refusedConn(RefuseHandshake, 0, h.slot.remote, "", "request headers not received within --handshake-timeout")
		l.dropHandshake(h)
	}
	if len(l.shakeq) == 0 {
		l.shakeq = l.shakeq[:0:0] // let the array go: it only grows otherwise
	}
}

// nextHandshakeDeadline returns when the oldest handshake expires (0: none).
func (l *loop) nextHandshakeDeadline() int64 {
	for len(l.shakeq) > 0 && l.shakeq[0].done {
		l.shakeq[0] = nil
		l.shakeq = l.shakeq[1:]
	}
	if len(l.shakeq) == 0 {
		return 0
	}
	return l.shakeq[0].deadline
}

// closeHandshakes closes every handshake in progress (the loop stops).
func (l *loop) closeHandshakes() {
	for _, h := range l.shakes {
		l.closeHandshake(h)
	}
	clear(l.shakeq)
	l.shakeq = nil
}

// waitTimeoutMs returns how long the loop may wait for events: until
// the wheel's next tick, the oldest handshake's deadline or the end of an
// accept pause, whichever comes first.
func (l *loop) waitTimeoutMs() int {
	next := l.wheel.next
	if d := l.nextHandshakeDeadline(); d != 0 && d < next {
		next = d
	}
	if l.acceptAt != 0 && l.acceptAt < next {
		next = l.acceptAt
	}
	return max(int((next-l.nowNano+int64(time.Millisecond)-1)/int64(time.Millisecond)), 0)
}
