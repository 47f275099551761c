//go:build linux

package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/ws"
)

// upgradeRequest is what a valid upgrade request asks for.
type upgradeRequest struct {
	room     string // "" for /echo
	since    uint64
	hasSince bool
	epoch    string
	key      string
	token    string
	name     string // the user the client says it is (presence), when no token says it
	presence bool   // the client wants presence_join and presence_leave events
}

// refusal is the HTTP answer to an upgrade request that is refused.
type refusal struct {
	reason RefuseReason
	status int
	msg    string
	header [2]string // one optional header: name, value
}

func (r *refusal) Error() string { return r.msg }

const roomNameRule = protocol.RoomRule

// parseUpgrade checks an upgrade request for the room (or echo endpoint)
// at hand, with no side effect: it is the part of the upgrade path that
// fuzzing covers.
func parseUpgrade(r *upgradeView, room string) (upgradeRequest, *refusal) {
	var u upgradeRequest
	if room != "" && !protocol.ValidRoomString(room) {
		return u, &refusal{reason: RefuseBadRequest, status: http.StatusBadRequest, msg: roomNameRule}
	}
	u.room = room
	q := &r.query
	if v := q.since; v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return u, &refusal{reason: RefuseBadRequest, status: http.StatusBadRequest, msg: "since must be a sequence number"}
		}
		u.since, u.hasSince = n, true
	}
	if u.epoch = q.epoch; !protocol.ValidEpoch(u.epoch) {
		return u, &refusal{reason: RefuseBadRequest, status: http.StatusBadRequest, msg: protocol.EpochRule}
	}
	if u.name = q.name; !protocol.ValidUser(u.name) {
		return u, &refusal{reason: RefuseBadRequest, status: http.StatusBadRequest, msg: protocol.UserRule}
	}
	switch q.presence {
	case "", "0", "false":
	case "1", "true":
		u.presence = true
	default:
		return u, &refusal{reason: RefuseBadRequest, status: http.StatusBadRequest, msg: "presence must be 1 or 0"}
	}
	if r.method != http.MethodGet || !headerHasToken(r.connection, "upgrade") || !headerHasToken(r.upgrade, "websocket") {
		return u, &refusal{reason: RefuseBadRequest, status: http.StatusUpgradeRequired, msg: "this endpoint speaks WebSocket", header: [2]string{"Upgrade", "websocket"}}
	}
	if r.version != "13" {
		return u, &refusal{reason: RefuseBadRequest, status: http.StatusUpgradeRequired, msg: "unsupported WebSocket version", header: [2]string{"Sec-WebSocket-Version", "13"}}
	}
	u.key = r.key
	if !ws.ValidClientKey(u.key) {
		return u, &refusal{reason: RefuseBadRequest, status: http.StatusBadRequest, msg: "invalid Sec-WebSocket-Key"}
	}
	u.token = q.token
	if h := r.authorization; h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return u, &refusal{reason: RefuseAuth, status: http.StatusUnauthorized, msg: "Authorization must be: Bearer <token>", header: [2]string{"WWW-Authenticate", "Bearer"}}
		}
		u.token = strings.TrimSpace(tok)
	}
	return u, nil
}

// handleWS upgrades GET /ws and GET /ws/{room} and hands the socket over to
// an event loop. The HTTP server's goroutine and buffers are released when
// the handler returns: an idle connection costs only its conn struct.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("room")
	if r.Pattern == "GET /ws" {
		name = "lobby"
	}
	s.upgrade(w, r, name)
}

// handleEcho upgrades GET /echo: a connection that echoes every message,
// served by the same connection layer as the chat.
func (s *Server) handleEcho(w http.ResponseWriter, r *http.Request) { s.upgrade(w, r, "") }

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, name string) {
	// Held until the connection is handed to its loop, so that a shutdown
	// (which takes the write lock after setting draining) drains it too.
	s.upgrading.RLock()
	defer s.upgrading.RUnlock()
	v := viewOfRequest(r)
	cmd, u, ref := s.prepare(&v, name, requestSlot(r))
	if ref != nil {
		if ref.header[0] != "" {
			w.Header().Set(ref.header[0], ref.header[1])
		}
		s.refuse(w, r, ref.reason, ref.status, ref.msg)
		return
	}
	if ref := s.admitHooks(r, &u, &cmd); ref != nil {
		s.releaseAdmission(&cmd)
		if cmd.control {
			s.refuseUpgraded(w, r, u.key, ref)
			return
		}
		if ref.header[0] != "" {
			w.Header().Set(ref.header[0], ref.header[1])
		}
		s.refuse(w, r, ref.reason, ref.status, ref.msg)
		return
	}
	fd, pending, err := s.hijack(w, u.key, cmd.deflate, cmd.control)
	if err != nil {
		s.releaseAdmission(&cmd)
		s.refusedConn(RefuseInternal, 0, r.RemoteAddr, r.URL.Path, err.Error())
		return
	}
	cmd.id = s.accepted.Add(1)
	cmd.fd, cmd.pending = fd, pending
	l := s.loops[int(s.next.Add(1))%len(s.loops)]
	l.command(cmd)
}

// prepare runs every check of an upgrade request for room name ("" for
// /echo) on the connection of slot sl (nil for one that has none), and
// builds the command that hands the connection to a loop, with the
// request as parsed. A check that fails returns its refusal instead; the
// connection is counted as a WebSocket one only when none fails. Both ways
// to upgrade call it: net/http's handler (upgrade) and the loops (accept.go).
func (s *Server) prepare(r *upgradeView, name string, sl *connSlot) (command, upgradeRequest, *refusal) {
	u, ref := parseUpgrade(r, name)
	if ref == nil {
		ref = s.admit(r, &u)
	}
	if ref != nil {
		return command{}, u, ref
	}
	cmd := command{kind: cmdAdd, room: u.room, since: u.since, hasSince: u.hasSince, epoch: u.epoch, echo: u.room == "",
		name: u.name, presence: u.presence}
	cmd.deflate = s.cfg.Compression && ws.AcceptDeflate(r.extensions)
	cmd.control = !cmd.echo && offersSubprotocol(r.protocols, protocol.Subprotocol)
	if s.cfg.Auth != nil {
		claims, err := s.cfg.Auth.Verify(u.token)
		if err != nil {
			return command{}, u, &refusal{reason: RefuseAuth, status: http.StatusUnauthorized, msg: err.Error(), header: [2]string{"WWW-Authenticate", "Bearer"}}
		}
		if u.room != "" && !claims.MayJoin(u.room) {
			return command{}, u, &refusal{reason: RefuseForbidden, status: http.StatusForbidden, msg: "the token does not allow this room"}
		}
		cmd.claims = &claims
	}
	if ref := s.admitURLRoom(u.room, cmd.claims); ref != nil {
		return command{}, u, ref
	}
	cmd.ip = addrIP(r.remoteAddr)
	if ref := s.takeConn(sl, &cmd); ref != nil {
		return command{}, u, ref
	}
	return cmd, u, nil
}

// admit applies the server-wide checks that take nothing: origin,
// shutdown, the room cap.
func (s *Server) admit(r *upgradeView, u *upgradeRequest) *refusal {
	if !s.originAllowed(r) {
		return &refusal{reason: RefuseOrigin, status: http.StatusForbidden, msg: "origin not allowed"}
	}
	if s.draining.Load() {
		return &refusal{reason: RefuseShuttingDown, status: http.StatusServiceUnavailable, msg: "server shutting down"}
	}
	if u.room != "" && s.cfg.MaxRooms > 0 && s.hub.Rooms() >= int64(s.cfg.MaxRooms) && s.hub.Lookup([]byte(u.room)) == nil {
		return &refusal{reason: RefuseRoomsFull, status: http.StatusServiceUnavailable, msg: "this server holds as many rooms as it may", header: [2]string{"Retry-After", "5"}}
	}
	return nil
}

// takeConn counts the upgrade attempt against its address's rate and
// makes the connection a WebSocket one in the connection counts. The caps
// were checked when the request came in (limitHTTP), its own connection
// counted: the upgrade passes that count on. A request that came another
// way (no slot) is counted and checked here.
func (s *Server) takeConn(sl *connSlot, cmd *command) *refusal {
	now := time.Now()
	perIP := &refusal{reason: RefusePerIP, status: http.StatusTooManyRequests, msg: "too many connections from your address", header: [2]string{"Retry-After", "1"}}
	if s.ips != nil && !s.ips.attempt(cmd.ip, now) {
		perIP.reason = RefuseConnectRate
		return perIP
	}
	if sl != nil && sl.upgrade() {
		cmd.ipCounted = s.ips != nil
		return nil
	}
	if n := s.conns.Add(1) + s.httpConns.Load(); s.cfg.MaxConnections > 0 && n > int64(s.cfg.MaxConnections) {
		s.conns.Add(-1)
		return &refusal{reason: RefuseMaxConnections, status: http.StatusServiceUnavailable, msg: "server full", header: [2]string{"Retry-After", "1"}}
	}
	if s.ips != nil {
		if n := s.ips.hold(cmd.ip, now); s.cfg.MaxConnsPerIP > 0 && n > s.cfg.MaxConnsPerIP {
			s.ips.release(cmd.ip)
			s.conns.Add(-1)
			return perIP
		}
		cmd.ipCounted = true
	}
	return nil
}

// releaseAdmission gives back what takeConn took, for an upgrade that
// fails after it.
func (s *Server) releaseAdmission(cmd *command) {
	s.conns.Add(-1)
	if cmd.ipCounted {
		s.ips.release(cmd.ip)
		cmd.ipCounted = false
	}
}

func remoteIP(r *http.Request) netip.Addr { return addrIP(r.RemoteAddr) }

// addrIP is the address of a remote "ip:port", or the zero address.
func addrIP(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func (s *Server) handleBadRoom(w http.ResponseWriter, r *http.Request) {
	s.refuse(w, r, RefuseBadRequest, http.StatusBadRequest, roomNameRule)
}

// refuse answers a refused upgrade with msg, counts it and logs why
// (rate-limited: see refusalLog).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, reason RefuseReason, status int, msg string) {
	s.refusedConn(reason, status, r.RemoteAddr, r.URL.Path, msg)
	http.Error(w, msg, status)
}

// hijack takes the socket from the HTTP server, answers the upgrade, and
// returns a descriptor the event loop will own, plus any bytes the client
// sent after the request. A TCP socket is duplicated; a TLS connection is
// bridged to one end of a socket pair by two goroutines (see bridgeTLS).
func (s *Server) hijack(w http.ResponseWriter, key string, deflate, control bool) (fd int, pending []byte, err error) {
	netConn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return -1, nil, fmt.Errorf("hijack: %w", err)
	}
	if n := rw.Reader.Buffered(); n > 0 {
		pending = make([]byte, n)
		if _, err := io.ReadFull(rw.Reader, pending); err != nil {
			netConn.Close()
			return -1, nil, fmt.Errorf("read buffered bytes: %w", err)
		}
	}
	if uc, ok := netConn.(interface{ unread() []byte }); ok { // bytes a loop read and net/http did not
		pending = append(pending, uc.unread()...)
	}
	if err := netConn.SetWriteDeadline(time.Now().Add(s.cfg.HandshakeTimeout)); err != nil {
		netConn.Close()
		return -1, nil, fmt.Errorf("set deadline: %w", err)
	}
	if _, err := netConn.Write(appendSwitching(nil, key, deflate, control)); err != nil {
		netConn.Close()
		return -1, nil, fmt.Errorf("write upgrade response: %w", err)
	}
	if tc, ok := netConn.(*tls.Conn); ok {
		fd, err = s.bridgeTLS(tc)
		return fd, pending, err
	}
	defer netConn.Close() // the duplicate keeps the socket open
	sc, ok := netConn.(syscall.Conn)
	if !ok {
		return -1, nil, fmt.Errorf("hijack: %T has no file descriptor", netConn)
	}
	fd, err = dupNonblock(sc)
	return fd, pending, err
}

// appendSwitching appends the 101 answer to an upgrade to b.
func appendSwitching(b []byte, key string, deflate, control bool) []byte {
	b = append(b, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "...)
	b = append(b, ws.AcceptKey(key)...)
	b = append(b, "\r\n"...)
	if deflate {
		b = append(append(append(b, "Sec-WebSocket-Extensions: "...), ws.DeflateExtension...), "\r\n"...)
	}
	if control {
		b = append(append(append(b, "Sec-WebSocket-Protocol: "...), protocol.Subprotocol...), "\r\n"...)
	}
	return append(b, "\r\n"...)
}

func dupNonblock(sc syscall.Conn) (int, error) {
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("raw connection: %w", err)
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(orig uintptr) {
		fd, dupErr = unix.FcntlInt(orig, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, fmt.Errorf("raw connection: %w", err)
	}
	if dupErr != nil {
		return -1, fmt.Errorf("duplicate socket: %w", dupErr)
	}
	// The duplicate shares the open file description, so it is already
	// non-blocking; say so anyway in case a runtime ever changes that.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("set non-blocking: %w", err)
	}
	return fd, nil
}

// bridgeTLS connects a TLS connection to the event loop through a socket
// pair: the loop owns one end like any socket, and two goroutines copy
// between the other end and the TLS connection, encrypting and decrypting.
// TLS costs those two goroutines and their buffers per connection; at
// scale, terminate TLS at the load balancer.
func (s *Server) bridgeTLS(tc *tls.Conn) (int, error) {
	if err := tc.SetDeadline(time.Time{}); err != nil { // a body's read deadline too (limitHTTP)
		tc.Close()
		return -1, fmt.Errorf("clear deadline: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tc.Close()
		return -1, fmt.Errorf("socket pair: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		tc.Close()
		return -1, fmt.Errorf("set non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(fds[1]), "tls-bridge")
	plain, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[0])
		tc.Close()
		return -1, fmt.Errorf("socket pair: %w", err)
	}
	s.bridges.Add(2)
	closeBoth := func() { tc.Close(); plain.Close() }
	go func() {
		defer s.bridges.Done()
		_, _ = io.CopyBuffer(plain, tc, make([]byte, bridgeBuffer)) // ends when either side closes
		closeBoth()
	}()
	go func() {
		defer s.bridges.Done()
		_, _ = io.CopyBuffer(tc, plain, make([]byte, bridgeBuffer))
		closeBoth()
	}()
	return fds[0], nil
}

// bridgeBuffer is the copy buffer of each direction of a TLS bridge. Each
// goroutine holds its buffer while it waits, so an idle connection keeps
// both: io.Copy's 32 KiB each was most of an idle TLS connection's memory
// (docs/benchmarks-log.md, "TLS"). 4 KiB holds a batch of chat messages; a
// bigger write takes a few records instead of one.
const bridgeBuffer = 4 << 10

// headerHasToken reports whether the values of a comma-separated header
// hold token, case-insensitively.
func headerHasToken(values []string, token string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// offersSubprotocol reports whether the client lists name among its
// subprotocols (tokens compare exactly, RFC 6455 section 4.1).
func offersSubprotocol(values []string, name string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(part) == name {
				return true
			}
		}
	}
	return false
}

// originAllowed accepts clients that send no Origin (non-browsers), pages
// served by this server (same host), and the configured origins.
func (s *Server) originAllowed(r *upgradeView) bool {
	origin := r.origin
	if origin == "" {
		return true
	}
	for _, o := range s.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.host)
}
