//go:build linux

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/ws"
)

// The application's backend in the loop (docs/hooks.md). The connect hook,
// and the join hook of the URL's room, block the upgrade's own goroutine
// (admitHooks). Join and publish hooks asked for by a connection's frames
// never block its event loop: the loop hands the call to a hook worker
// (runHookWorker) and goes on; the worker feeds the verdict back to the
// loop as a command (cmdHook), which joins or publishes then. A
// connection's messages wait for the publish hook one at a time, so they
// keep their order.

// CodeRefused is the error code of a join or a message the application's
// backend refused; the error's message is the backend's reason.
const CodeRefused = "refused"

// maxHookQueue and maxHookQueueBytes bound the messages of one connection
// waiting for the publish hook, in number and in bytes (but one message of
// the largest size always fits); more are refused (rate_limited), counted
// and logged. Without the bytes, 64 messages of 16 KiB held 1 MiB a
// connection.
const (
	maxHookQueue      = 64
	maxHookQueueBytes = 64 << 10
)

// hookJob is a join or publish call a loop hands to the hook workers.
type hookJob struct {
	c       *conn
	gone    *atomic.Bool // the connection's connHooks.gone: a worker drops the job, uncalled
	kind    hooks.Kind
	room    string
	resume  room.Resume          // join
	join    hooks.JoinRequest    // join
	publish hooks.PublishRequest // publish
}

// hookResult is a call's verdict, back on the connection's loop.
type hookResult struct {
	kind    hooks.Kind
	room    string
	resume  room.Resume
	verdict hooks.Verdict
	message []byte // publish: the message to publish (the client's, or the backend's)
}

// connHooks is what a loop holds for a connection under hooks: the connect
// hook's data, and its messages waiting for the publish hook (the first one
// in flight when busy). Only connections with either have one.
type connHooks struct {
	data  json.RawMessage
	queue []pendingPublish
	bytes int // of the messages in queue
	busy  bool
	// gone is set on the loop when the connection stops being open; the
	// workers read it before each call: a closed connection's jobs cost
	// the backend nothing, and the live ones behind them do not wait.
	gone atomic.Bool
}

type pendingPublish struct {
	room *room.Room
	msg  []byte // the client's message, copied out of the read buffer
}

// runHookWorker calls the backend for the loops' jobs until ctx ends.
func (s *Server) runHookWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-s.hookJobs:
			if job.gone.Load() { // its verdict would be dropped on the loop
				s.hookJobsGone.Add(1)
				continue
			}
			res := &hookResult{kind: job.kind, room: job.room, resume: job.resume}
			switch job.kind {
			case hooks.Join:
				res.verdict = s.hooks.Join(ctx, job.join)
			case hooks.Publish:
				res.message, res.verdict = s.hooks.Publish(ctx, job.publish)
			}
			if res.verdict.Failed() {
				s.hookLog.failed(time.Now(), job.kind, res.verdict.Err)
			}
			s.stopMu.RLock()
			if !s.stopped {
				job.c.loop.command(command{kind: cmdHook, conn: job.c, hook: res})
			}
			s.stopMu.RUnlock()
		}
	}
}

// submitHook hands a job to the workers, or reports false when as many
// wait as may: the loop never waits for the backend.
func (s *Server) submitHook(job hookJob) bool {
	select {
	case s.hookJobs <- job:
		return true
	default:
		return false
	}
}

// overloadedMessage is what a client is told when its join or message
// cannot even wait for the backend.
const overloadedMessage = "too many requests wait for the application's backend: try again later"

// admitHooks asks the application's backend whether the connection may
// open (connect hook) and join the room of its URL (join hook), and notes
// what the connect hook names in cmd. It blocks for up to the hooks'
// timeout each: it runs on the upgrade's goroutine, never on an event loop
// (an upgrade served by a loop must call it behind admitBlocks).
func (s *Server) admitHooks(r *http.Request, u *upgradeRequest, cmd *command) *refusal {
	joinHook := u.room != "" && s.joinHook(u.room)
	if !s.hooks.On(hooks.Connect) && !joinHook {
		return nil
	}
	// One notion of the user on every transport: verified (the token's
	// subject, the connect hook's user) or "", the client's ?name= apart.
	user, name := "", u.name
	if cmd.claims != nil {
		user, name = cmd.claims.Subject, ""
	}
	if s.hooks.On(hooks.Connect) {
		req := hooks.ConnectRequest{Room: u.room, Name: u.name, Remote: cmd.ip.String(), Origin: r.Header.Get("Origin")}
		if cmd.claims != nil {
			req.User = cmd.claims.Subject
		} else {
			req.Token = u.token // the backend may check its own tokens
		}
		ans, v := s.hooks.Connect(r.Context(), req)
		if v.Failed() {
			s.hookLog.failed(time.Now(), hooks.Connect, v.Err)
		}
		if ref := hookRefusal(v, ans.Status); ref != nil {
			return ref
		}
		if ans.User != "" {
			user, name, cmd.hookUser = ans.User, "", ans.User
		}
		cmd.hookData, cmd.hookRooms = ans.Data, ans.Rooms
	}
	if joinHook {
		v := s.hooks.Join(r.Context(), hooks.JoinRequest{User: user, Name: name, Room: u.room, Data: cmd.hookData})
		if v.Failed() {
			s.hookLog.failed(time.Now(), hooks.Join, v.Err)
		}
		return hookRefusal(v, http.StatusForbidden)
	}
	return nil
}

// hookRefusal is the answer to an upgrade a hook did not allow: the
// backend's status and reason, or 503 when it did not answer and the hook
// fails closed.
func hookRefusal(v hooks.Verdict, status int) *refusal {
	switch {
	case v.Allow:
		return nil
	case v.Failed():
		return &refusal{reason: RefuseHook, status: http.StatusServiceUnavailable, msg: v.Reason, header: [2]string{"Retry-After", "5"}}
	}
	return &refusal{reason: RefuseHook, status: status, msg: v.Reason}
}

// refuseUpgraded refuses a client that speaks protocol.Subprotocol after
// the upgrade, with a close frame whose code is 4000 plus the HTTP status
// (4403, 4401, 4503…) and whose reason is the backend's: a browser sees
// neither the status nor the body of a refused upgrade, only a close.
func (s *Server) refuseUpgraded(w http.ResponseWriter, r *http.Request, key string, ref *refusal) {
	s.refusedConn(ref.reason, ref.status, r.RemoteAddr, r.URL.Path, ref.msg)
	netConn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.log.Debug("refuse after the upgrade", "err", err)
		return
	}
	defer netConn.Close()
	reason := ref.msg
	if len(reason) > 123 { // a close frame's reason is at most 123 bytes
		reason = reason[:123]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		ws.AcceptKey(key) + "\r\nSec-WebSocket-Protocol: " + protocol.Subprotocol + "\r\n\r\n"
	out := ws.AppendCloseFrame([]byte(resp), ws.StatusCode(4000+ref.status), reason)
	if err := netConn.SetWriteDeadline(time.Now().Add(s.cfg.HandshakeTimeout)); err != nil {
		return
	}
	if _, err := rw.Write(out); err == nil {
		_ = rw.Flush()
	}
}

// hookGone marks c's jobs as a closed connection's: the workers drop them.
func (l *loop) hookGone(c *conn) {
	if h := l.hooked[c]; h != nil {
		h.gone.Store(true)
	}
}

// hooksOf returns c's hook state, creating it.
func (l *loop) hooksOf(c *conn) *connHooks {
	h := l.hooked[c]
	if h == nil {
		h = &connHooks{}
		l.hooked[c] = h
	}
	return h
}

// addHooked applies what the connect hook named to a connection being
// added: its user, its data, and the rooms it joins besides the URL's
// (each checked like a join frame's, but for the join hook).
func (l *loop) addHooked(c *conn, cmd *command) {
	if len(cmd.hookData) > 0 {
		l.hooksOf(c).data = cmd.hookData
	}
	for _, name := range cmd.hookRooms {
		if c.state != stateOpen {
			return
		}
		if c.membershipOf([]byte(name)) >= 0 || c.isWaiting([]byte(name)) {
			continue
		}
		f := &protocol.Frame{Room: []byte(name)}
		if len(c.rooms)+len(c.waiting) >= l.srv.cfg.MaxRoomsPerConn {
			c.sendError("too_many_rooms", l.roomsMessage, f)
			return
		}
		// The backend named the room, so the join hook is not asked; the
		// token and the namespace are, as for any join.
		if c.mayJoin(f) {
			c.join(f.Room, room.Resume{}, false)
		}
	}
}

// joinHooked asks the join hook whether c may join the room, off the loop;
// the room counts as one c is waiting for meanwhile.
func (c *conn) joinHooked(f *protocol.Frame, rs room.Resume) {
	l := c.loop
	name := string(f.Room)
	user, uname := c.hookIdentity()
	h := l.hooksOf(c)
	job := hookJob{c: c, gone: &h.gone, kind: hooks.Join, room: name, resume: rs,
		join: hooks.JoinRequest{Connection: l.srv.connID(c.id), User: user, Name: uname, Room: name, Data: h.data}}
	if !l.srv.submitHook(job) {
		l.stats.dropped[DropHook].Add(1)
		l.srv.hookLog.refused(time.Now(), hooks.Join, "hook calls refused: all workers busy and their queue full")
		c.sendError(protocol.CodeUnavailable, overloadedMessage, f)
		return
	}
	c.waiting = append(c.waiting, name)
}

// publishHooked queues a chat message for the publish hook.
func (c *conn) publishHooked(f *protocol.Frame, data []byte, r *room.Room) {
	l := c.loop
	h := l.hooksOf(c)
	if len(h.queue) >= maxHookQueue || len(h.queue) > 0 && h.bytes+len(data) > maxHookQueueBytes {
		l.stats.dropped[DropRateLimit].Add(1)
		l.srv.hookLog.refused(time.Now(), hooks.Publish, "a connection's messages waiting for the publish hook are at their bound", "messages", len(h.queue), "bytes", h.bytes)
		c.sendError(protocol.CodeRateLimited, fmt.Sprintf("more than %d messages or %d KiB wait for the application's backend", maxHookQueue, maxHookQueueBytes>>10), f)
		return
	}
	h.queue = append(h.queue, pendingPublish{room: r, msg: bytes.Clone(data)})
	h.bytes += len(data)
	c.nextHooked(h)
}

// nextHooked hands c's first waiting message to the publish hook, unless
// one is in flight.
func (c *conn) nextHooked(h *connHooks) {
	l := c.loop
	for !h.busy && len(h.queue) > 0 && c.state == stateOpen {
		p := h.queue[0]
		user, name := c.hookIdentity()
		job := hookJob{c: c, gone: &h.gone, kind: hooks.Publish, room: p.room.Name(), publish: hooks.PublishRequest{
			Connection: l.srv.connID(c.id), User: user, Name: name, Room: p.room.Name(), Message: p.msg, Data: h.data}}
		if l.srv.submitHook(job) {
			h.busy = true
			return
		}
		h.pop()
		l.stats.dropped[DropHook].Add(1)
		l.srv.hookLog.refused(time.Now(), hooks.Publish, "hook calls refused: all workers busy and their queue full")
		c.refuseHooked(p.msg, protocol.CodeUnavailable, overloadedMessage)
	}
}

// refuseHooked refuses a message that waited for the publish hook, naming
// its message_id and room as every refusal does.
func (c *conn) refuseHooked(msg []byte, code, reason string) {
	f := &c.loop.frame
	f.SenderOverride = c.sender
	if protocol.ParseFrame(msg, f) != nil {
		*f = protocol.Frame{}
	}
	c.sendError(code, reason, f)
}

// hookDone applies a verdict on the connection's loop. A connection closed
// meanwhile is told nothing.
func (l *loop) hookDone(c *conn, res *hookResult) {
	if c.state != stateOpen {
		return
	}
	switch res.kind {
	case hooks.Join:
		l.hookJoined(c, res)
	case hooks.Publish:
		l.hookPublished(c, res)
	}
}

func (l *loop) hookJoined(c *conn, res *hookResult) {
	for i, w := range c.waiting {
		if w == res.room {
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			break
		}
	}
	if len(c.waiting) == 0 {
		c.waiting = nil
	}
	if !res.verdict.Allow {
		l.stats.dropped[DropHook].Add(1)
		c.sendError(hookCode(res.verdict), res.verdict.Reason, &protocol.Frame{Room: []byte(res.room)})
		return
	}
	c.join([]byte(res.room), res.resume, false)
}

func (l *loop) hookPublished(c *conn, res *hookResult) {
	h := l.hooked[c]
	if h == nil || len(h.queue) == 0 {
		return
	}
	p := h.pop()
	h.busy = false
	switch {
	case l.quiet || l.draining:
		c.refuseHooked(p.msg, protocol.CodeUnavailable, "server shutting down")
	case !res.verdict.Allow:
		l.stats.dropped[DropHook].Add(1)
		c.refuseHooked(p.msg, hookCode(res.verdict), res.verdict.Reason)
	case !c.isMember(p.room):
		c.refuseHooked(p.msg, "not_joined", "not a member of this room")
	default:
		f := &l.frame
		f.SenderOverride = c.sender
		if err := protocol.ParseFrame(res.message, f); err != nil { // checked by the worker: cannot happen
			c.refuseHooked(p.msg, protocol.CodeInvalidMessage, err.Error())
			break
		}
		c.publish(f, res.message, p.room)
	}
	c.nextHooked(h)
}

// pop takes the first waiting message off the queue.
func (h *connHooks) pop() pendingPublish {
	p := h.queue[0]
	h.queue[0] = pendingPublish{}
	h.queue = h.queue[1:]
	h.bytes -= len(p.msg)
	return p
}

// hookCode is the error code of a hook's refusal: refused when the
// backend said no, unavailable when it did not answer.
func hookCode(v hooks.Verdict) string {
	if v.Failed() {
		return protocol.CodeUnavailable
	}
	return CodeRefused
}

func (c *conn) isMember(r *room.Room) bool {
	for i := range c.rooms {
		if c.rooms[i].room == r {
			return true
		}
	}
	return false
}

// hookLog logs the hooks' failed calls, at most one line a second per hook
// with the count of those held back: a dead backend under load would
// otherwise log a line per message.
type hookLog struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       [3]time.Time
	suppressed [3]int
}

func (h *hookLog) failed(now time.Time, k hooks.Kind, err error) {
	h.warn(now, k, "hook failed", "err", err)
}

// refused logs calls not made, and messages not queued, because too many
// wait: the same limit of a line a second per hook.
func (h *hookLog) refused(now time.Time, k hooks.Kind, msg string, args ...any) {
	h.warn(now, k, msg, args...)
}

func (h *hookLog) warn(now time.Time, k hooks.Kind, msg string, args ...any) {
	h.mu.Lock()
	if now.Sub(h.last[k]) < time.Second {
		h.suppressed[k]++
		h.mu.Unlock()
		return
	}
	h.last[k] = now
	n := h.suppressed[k]
	h.suppressed[k] = 0
	h.mu.Unlock()
	h.log.Warn(msg, append(args, "hook", k.String(), "suppressed", n)...)
}
