//go:build linux

package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/ws"
)

// handleWS upgrades GET /ws and GET /ws/{room} and hands the socket over to
// an event loop. The HTTP server's goroutine and buffers are released when
// the handler returns: an idle connection costs only its conn struct.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("room")
	if r.Pattern == "GET /ws" {
		name = "lobby"
	}
	if !protocol.ValidRoomString(name) {
		s.refuse(w, RefuseBadRequest, http.StatusBadRequest, "room names are 1 to 64 characters of A-Z a-z 0-9 . _ -")
		return
	}
	var since uint64
	var hasSince bool
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.refuse(w, RefuseBadRequest, http.StatusBadRequest, "since must be a sequence number")
			return
		}
		since, hasSince = n, true
	}
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Upgrade", "websocket")
		s.refuse(w, RefuseBadRequest, http.StatusUpgradeRequired, "this endpoint speaks WebSocket")
		return
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		s.refuse(w, RefuseBadRequest, http.StatusUpgradeRequired, "unsupported WebSocket version")
		return
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	if !ws.ValidClientKey(key) {
		s.refuse(w, RefuseBadRequest, http.StatusBadRequest, "invalid Sec-WebSocket-Key")
		return
	}
	if !s.originAllowed(r) {
		s.refuse(w, RefuseOrigin, http.StatusForbidden, "origin not allowed")
		return
	}
	if s.draining.Load() {
		s.refuse(w, RefuseShuttingDown, http.StatusServiceUnavailable, "server shutting down")
		return
	}
	if n := s.conns.Add(1); s.cfg.MaxConnections > 0 && n > int64(s.cfg.MaxConnections) {
		s.conns.Add(-1)
		w.Header().Set("Retry-After", "1")
		s.refuse(w, RefuseMaxConnections, http.StatusServiceUnavailable, "server full")
		return
	}
	fd, pending, err := s.hijack(w, key)
	if err != nil {
		s.conns.Add(-1)
		s.refused[RefuseInternal].Add(1)
		s.log.Debug("upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	s.accepted.Add(1)
	l := s.loops[int(s.next.Add(1))%len(s.loops)]
	l.command(command{kind: cmdAdd, fd: fd, room: name, since: since, hasSince: hasSince, pending: pending})
}

func (s *Server) handleBadRoom(w http.ResponseWriter, _ *http.Request) {
	s.refuse(w, RefuseBadRequest, http.StatusBadRequest, "room names are 1 to 64 characters of A-Z a-z 0-9 . _ -")
}

func (s *Server) refuse(w http.ResponseWriter, reason RefuseReason, status int, msg string) {
	s.refused[reason].Add(1)
	http.Error(w, msg, status)
}

// hijack takes the socket from the HTTP server, answers the upgrade, and
// returns a duplicate of its descriptor that the event loop will own, plus
// any bytes the client sent after the request.
func (s *Server) hijack(w http.ResponseWriter, key string) (fd int, pending []byte, err error) {
	netConn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return -1, nil, fmt.Errorf("hijack: %w", err)
	}
	defer netConn.Close() // the duplicate keeps the socket open
	tcp, ok := netConn.(*net.TCPConn)
	if !ok {
		return -1, nil, fmt.Errorf("hijack: %T is not a TCP connection", netConn)
	}
	if n := rw.Reader.Buffered(); n > 0 {
		pending = make([]byte, n)
		if _, err := rw.Reader.Read(pending); err != nil {
			return -1, nil, fmt.Errorf("read buffered bytes: %w", err)
		}
	}
	if err := tcp.SetWriteDeadline(time.Now().Add(s.cfg.HandshakeTimeout)); err != nil {
		return -1, nil, fmt.Errorf("set deadline: %w", err)
	}
	resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		ws.AcceptKey(key) + "\r\n\r\n"
	if _, err := tcp.Write([]byte(resp)); err != nil {
		return -1, nil, fmt.Errorf("write upgrade response: %w", err)
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return -1, nil, fmt.Errorf("raw connection: %w", err)
	}
	fd = -1
	var dupErr error
	if err := raw.Control(func(orig uintptr) {
		fd, dupErr = unix.FcntlInt(orig, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, nil, fmt.Errorf("raw connection: %w", err)
	}
	if dupErr != nil {
		return -1, nil, fmt.Errorf("duplicate socket: %w", dupErr)
	}
	// The duplicate shares the open file description, so it is already
	// non-blocking; say so anyway in case a runtime ever changes that.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("set non-blocking: %w", err)
	}
	return fd, pending, nil
}

// headerHasToken reports whether a comma-separated header holds token,
// case-insensitively.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// originAllowed accepts clients that send no Origin (non-browsers), pages
// served by this server (same host), and the configured origins.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	for _, o := range s.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}
