//go:build linux

package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Every HTTP connection counts against the same caps as the WebSocket
// connections (--max-connections, --max-connections-per-ip), from its
// accept until it closes or becomes a WebSocket connection, whose count it
// then passes on. Without that, long polls and slow request bodies let one
// address hold sockets past every cap, up to the process's file limit.
//
// A connection is counted when it is accepted, whatever the caps. One
// accepted beyond a cap has its requests refused (429 or 503, then the
// connection is closed: the client reads why) until its address and the
// server are under the caps again.
// An address that holds twice its cap (it opens connections without
// reading the answers) gets its next ones closed at once, unanswered.
//
// Each request's body must arrive within --http-body-timeout, counted from
// the end of its headers, and hold at most --max-body-bytes: the deadline
// is on reading the body only, since a long poll legitimately holds the
// response for up to a minute.

// Phases of an HTTP connection, as the refusal counts need them.
const (
	phaseHeader = iota // reading a first request's line and headers
	phaseActive        // a handler runs
	phaseIdle          // between requests (keep-alive)
	phaseGone          // closed or upgraded
)

// connSlot is one accepted HTTP connection's share of the connection caps.
type connSlot struct {
	srv    *Server
	ip     netip.Addr
	remote string
	held   atomic.Bool // counted in Server.httpConns and, with per-address limits, by the address
	// Whether the connection is within the per-address and the total caps.
	// It is when it was accepted under them, or when a request of it finds
	// its address and the server under them again; it then stays so. A
	// connection within the caps is always one of the first cap ones, so
	// the connections served never exceed the caps, however fast they come.
	withinIP, withinAll atomic.Bool
	phase               atomic.Int32 // phaseHeader, ...
	spoke               atomic.Bool  // bytes came in since the connection went idle: a request has begun
	served              atomic.Bool  // the current request reached the handlers (limitHTTP)
}

// takeSlot counts a connection just accepted from remote (host:port). It
// returns nil when the connection must be closed at once: its address holds
// twice its cap.
func (s *Server) takeSlot(remote string) *connSlot {
	sl := &connSlot{srv: s, remote: remote}
	if ap, err := netip.ParseAddrPort(sl.remote); err == nil {
		sl.ip = ap.Addr().Unmap()
	}
	n := s.httpConns.Add(1) + s.conns.Load()
	sl.held.Store(true)
	sl.withinAll.Store(s.cfg.MaxConnections == 0 || n <= int64(s.cfg.MaxConnections))
	sl.withinIP.Store(true)
	if s.ips != nil {
		n := s.ips.hold(sl.ip, time.Now())
		if s.cfg.MaxConnsPerIP > 0 && n > 2*s.cfg.MaxConnsPerIP {
			sl.release()
			s.refusedConn(RefusePerIP, 0, sl.remote, "", "connection closed at once: the address holds twice its cap")
			return nil
		}
		sl.withinIP.Store(s.cfg.MaxConnsPerIP == 0 || n <= s.cfg.MaxConnsPerIP)
	}
	return sl
}

// admitRequest checks a request's connection against the caps: a
// connection not within them gets in once its address and the server are
// under them again.
func (sl *connSlot) admitRequest() *refusal {
	s := sl.srv
	if !sl.withinIP.Load() {
		if s.ips.over(sl.ip) {
			return &refusal{reason: RefusePerIP, status: http.StatusTooManyRequests, msg: "too many connections from your address"}
		}
		sl.withinIP.Store(true)
	}
	if !sl.withinAll.Load() {
		if s.conns.Load()+s.httpConns.Load() > int64(s.cfg.MaxConnections) {
			return &refusal{reason: RefuseMaxConnections, status: http.StatusServiceUnavailable, msg: "server full"}
		}
		sl.withinAll.Store(true)
	}
	return nil
}

// release gives the slot back, once: the connection closed.
func (sl *connSlot) release() {
	sl.phase.Store(phaseGone)
	if !sl.held.CompareAndSwap(true, false) {
		return
	}
	sl.srv.httpConns.Add(-1)
	if sl.srv.ips != nil {
		sl.srv.ips.release(sl.ip)
	}
}

// upgrade passes the slot on to the WebSocket connection the request
// becomes: the connection is counted as a WebSocket one from now on, by the
// same address, and the loop that owns it releases it. It reports false
// when the slot was already given back.
func (sl *connSlot) upgrade() bool {
	if !sl.held.CompareAndSwap(true, false) {
		return false
	}
	sl.srv.conns.Add(1)
	sl.srv.httpConns.Add(-1)
	return true
}

// readFailed counts a read of the connection that hit its deadline while
// net/http read a request's line and headers: the handshake timeout. A
// deadline between requests is the keep-alive's end, not a refusal; the
// body's deadline is counted by timedBody.
func (sl *connSlot) readFailed(err error) {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return
	}
	switch sl.phase.Load() {
	case phaseIdle:
		if !sl.spoke.Load() {
			return
		}
	case phaseHeader:
	default:
		return
	}
	sl.phase.Store(phaseGone) // counted once
	sl.srv.refusedConn(RefuseHandshake, 0, sl.remote, "", "request headers not received within --handshake-timeout")
}

// wrote looks at what is written on the connection while no handler runs:
// that is net/http refusing a request it could not read (431 for a request
// line or headers over the maximum, 400 for a malformed request), which it
// answers itself, without the handlers. Behind TLS the answer is encrypted
// here and not counted.
func (sl *connSlot) wrote(b []byte) {
	// net/http marks the connection active once it read bytes, even for a
	// request it then refuses: what tells its refusals from the handlers'
	// answers is whether the request reached them.
	if sl.served.Load() || sl.phase.Load() == phaseGone {
		return
	}
	if len(b) < 12 || string(b[:7]) != "HTTP/1." {
		return
	}
	status, err := strconv.Atoi(string(b[9:12]))
	if err != nil || status < 400 {
		return
	}
	reason := RefuseBadRequest
	if status == http.StatusRequestHeaderFieldsTooLarge {
		reason = RefuseHeaderSize
	}
	sl.phase.Store(phaseGone) // net/http closes the connection after it
	msg, _, _ := strings.Cut(string(b[9:min(len(b), 64)]), "\r")
	sl.srv.refusedConn(reason, status, sl.remote, "", msg)
}

// slotOf finds the slot of a connection net/http hands to its hooks: ours,
// or the TLS connection over it.
func slotOf(c net.Conn) *connSlot {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*countingConn); ok {
		return cc.slot
	}
	return nil
}

// connState follows the phases of each connection (http.Server.ConnState).
func (s *Server) connState(c net.Conn, st http.ConnState) {
	sl := slotOf(c)
	if sl == nil {
		return
	}
	switch st {
	case http.StateActive:
		sl.phase.Store(phaseActive)
	case http.StateIdle:
		sl.spoke.Store(false)
		sl.served.Store(false)
		sl.phase.Store(phaseIdle)
	case http.StateHijacked, http.StateClosed:
		sl.phase.Store(phaseGone)
	}
}

type slotKey struct{}

// connContext puts the connection's slot in its requests' context
// (http.Server.ConnContext).
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	if sl := slotOf(c); sl != nil {
		return context.WithValue(ctx, slotKey{}, sl)
	}
	return ctx
}

func requestSlot(r *http.Request) *connSlot {
	sl, _ := r.Context().Value(slotKey{}).(*connSlot)
	return sl
}

// limitHTTP applies the connection caps, the body deadline and the body
// size limit to every request, whatever its path.
func (s *Server) limitHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sl := requestSlot(r)
		if sl != nil {
			sl.served.Store(true)
		}
		if sl != nil && sl.held.Load() {
			if ref := sl.admitRequest(); ref != nil {
				w.Header().Set("Retry-After", "1")
				s.refuseRequest(w, r, ref.reason, ref.status, ref.msg)
				return
			}
		}
		if r.ContentLength > s.cfg.MaxBodyBytes {
			s.refuseRequest(w, r, RefuseBodySize, http.StatusRequestEntityTooLarge, "request body larger than the server's maximum")
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = s.timeBody(w, r)
		}
		next.ServeHTTP(w, r)
	})
}

// refuseRequest answers a refused request, in JSON on the JSON paths (the
// HTTP transport and the server API), counts it and logs why. The
// connection goes after the answer, so that it stops counting, and its
// body is not waited for (net/http would read up to 256 KiB of it to keep
// the connection, for as long as the client takes).
func (s *Server) refuseRequest(w http.ResponseWriter, r *http.Request, reason RefuseReason, status int, msg string) {
	w.Header().Set("Connection", "close")
	if r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	if strings.HasPrefix(r.URL.Path, "/rooms/") || strings.HasPrefix(r.URL.Path, "/api/") {
		s.refusedConn(reason, status, r.RemoteAddr, r.URL.Path, msg)
		apiError(w, status, reason.String(), msg)
		return
	}
	s.refuse(w, r, reason, status, msg)
}

// bodyRefusal is what a handler reads from a body the server cut (too
// slow or too large): the refusal is already counted and logged, and the
// connection closes after the answer.
type bodyRefusal struct {
	reason RefuseReason
	status int
	msg    string
}

func (e *bodyRefusal) Error() string { return e.msg }

var (
	errBodyTooLarge = &bodyRefusal{RefuseBodySize, http.StatusRequestEntityTooLarge, "request body larger than the server's maximum"}
	errBodyTimeout  = &bodyRefusal{RefuseBodyTimeout, http.StatusRequestTimeout, "request body not received within the server's deadline"}
)

// timedBody is a request body read under a deadline and a size limit.
type timedBody struct {
	srv   *Server
	r     *http.Request
	body  interface{ Read([]byte) (int, error) }
	close func() error
	rc    *http.ResponseController
	timed bool
	done  bool
}

func (s *Server) timeBody(w http.ResponseWriter, r *http.Request) *timedBody {
	mb := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	b := &timedBody{srv: s, r: r, body: mb, close: mb.Close, rc: http.NewResponseController(w)}
	if s.cfg.BodyTimeout > 0 {
		b.timed = b.rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) == nil
	}
	return b
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == nil || b.done {
		return n, err
	}
	b.done = true
	if b.timed && errors.Is(err, io.EOF) {
		// The body is over: net/http now reads ahead to see the client
		// leave, and a deadline left behind would cut a long answer.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	var tooBig *http.MaxBytesError
	var ne net.Error
	var refusal *bodyRefusal
	switch {
	case errors.As(err, &tooBig):
		refusal = errBodyTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		refusal = errBodyTimeout
	default:
		return n, err
	}
	b.srv.refusedConn(refusal.reason, refusal.status, b.r.RemoteAddr, b.r.URL.Path, refusal.msg)
	return n, refusal
}

func (b *timedBody) Close() error { return b.close() }
