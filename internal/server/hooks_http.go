//go:build linux

package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
)

// The HTTP transport under hooks: a request has no connection to remember
// a verdict by, so each poll and each POST asks the connect hook and the
// join hook of its room, and each POST the publish hook, on the request's
// own goroutine (docs/hooks.md#the-http-transport).

// pollCaller is who sends an HTTP transport request: the user (the token's
// subject, or the one the connect hook names; "" when anonymous), the name
// it gives itself, and the connect hook's data: the same notion of the
// user as a WebSocket connection's.
type pollCaller struct {
	user string
	name string // ?name=, unverified, when user is ""
	data json.RawMessage
}

// pollHooks asks the connect and join hooks about an HTTP transport
// request for room. It answers a refusal itself and returns false.
func (s *Server) pollHooks(w http.ResponseWriter, r *http.Request, room string, claims *auth.Claims) (pollCaller, bool) {
	var c pollCaller
	if claims != nil {
		c.user = claims.Subject
	}
	name := r.URL.Query().Get("name")
	if !protocol.ValidUser(name) { // a WebSocket's would be refused: here it names nobody
		name = ""
	}
	if c.user == "" {
		c.name = name
	}
	if s.hooks.On(hooks.Connect) {
		req := hooks.ConnectRequest{Room: room, User: c.user, Name: name, Remote: remoteIP(r).String(), Origin: r.Header.Get("Origin")}
		if claims == nil {
			req.Token = r.URL.Query().Get("token")
			if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
				req.Token = strings.TrimSpace(tok)
			}
		}
		ans, v := s.hooks.Connect(r.Context(), req)
		if !s.hookAllows(w, r, hooks.Connect, v, ans.Status) {
			return c, false
		}
		if ans.User != "" {
			c.user, c.name = ans.User, ""
		}
		c.data = ans.Data
	}
	if s.joinHook(room) {
		v := s.hooks.Join(r.Context(), hooks.JoinRequest{User: c.user, Name: c.name, Room: room, Data: c.data})
		if !s.hookAllows(w, r, hooks.Join, v, http.StatusForbidden) {
			return c, false
		}
	}
	return c, true
}

// hookAllows answers a request a hook refused (the backend's status, or
// 503 when it did not answer) and returns false.
func (s *Server) hookAllows(w http.ResponseWriter, r *http.Request, k hooks.Kind, v hooks.Verdict, status int) bool {
	if v.Failed() {
		s.hookLog.failed(time.Now(), k, v.Err)
	}
	ref := hookRefusal(v, status)
	if ref == nil {
		return true
	}
	code := CodeRefused
	if v.Failed() {
		code = protocol.CodeUnavailable
		w.Header().Set("Retry-After", "5")
	}
	s.pollError(w, r, RefuseHook, ref.status, code, ref.msg)
	return false
}

// postHook asks the publish hook about a POSTed message (body, parsed in
// f) for rm, when the room's namespace has it, and returns what to
// publish, parsed in f; it answers a refusal itself and returns false.
func (s *Server) postHook(w http.ResponseWriter, r *http.Request, rm *room.Room, c pollCaller, body []byte, f *protocol.Frame) ([]byte, bool) {
	if !rm.Options().PublishHook {
		return body, true
	}
	msg, v := s.hooks.Publish(r.Context(), hooks.PublishRequest{User: c.user, Name: c.name, Room: rm.Name(), Message: body, Data: c.data})
	if !v.Allow {
		if v.Failed() {
			s.hookLog.failed(time.Now(), hooks.Publish, v.Err)
		}
		s.httpDropped[DropHook].Add(1)
		status := http.StatusForbidden
		if v.Failed() {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, protocol.AppendError(nil, hookCode(v), v.Reason, f))
		return nil, false
	}
	if v.Outcome == hooks.Replaced {
		if err := protocol.ParseFrame(msg, f); err != nil { // checked by the hooks client: cannot happen
			writeJSON(w, http.StatusBadGateway, protocol.AppendError(nil, protocol.CodeUnavailable, err.Error(), nil))
			return nil, false
		}
	}
	return msg, true
}
