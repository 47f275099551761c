//go:build linux

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
)

// The HTTP transport: the same rooms and messages as the WebSocket, for
// clients that cannot keep one open.
//
//	POST /rooms/{room}/messages              send a chat message (same JSON, limits and auth)
//	GET  /rooms/{room}/messages?since=&wait= messages after since, waiting up to wait for one
//
// A poller is not a member of the room: it reads the room's history ring, so
// it sees exactly the messages and the seq order that members see, and its
// polls keep the room alive. Each waiting poll holds a net/http goroutine;
// that is the cost of polling, which the loadtest comparison measures.

// maxPollWait bounds the wait of one long poll.
const maxPollWait = 60 * time.Second

// pollLimiter is the per-sender rate limit of POSTs: the token's subject,
// or the source address without authentication.
type pollLimiter struct {
	rate, burst float64
	mu          sync.Mutex
	m           map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func (l *pollLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[key]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.m[key] = b
	}
	b.tokens = min(b.tokens+now.Sub(b.last).Seconds()*l.rate, l.burst)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// sweep forgets senders whose bucket is full again.
func (l *pollLimiter) sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, b := range l.m {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.m, k)
		}
	}
}

// pollAuth authenticates a poll request and checks the room against the
// token. It answers the refusal itself and returns false.
func (s *Server) pollAuth(w http.ResponseWriter, r *http.Request, room string) (*auth.Claims, bool) {
	if s.cfg.Auth == nil {
		return nil, true
	}
	token := r.URL.Query().Get("token")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			s.pollError(w, r, RefuseAuth, http.StatusUnauthorized, "unauthorized", "Authorization must be: Bearer <token>")
			return nil, false
		}
		token = strings.TrimSpace(tok)
	}
	claims, err := s.cfg.Auth.Verify(token)
	if err != nil {
		s.pollError(w, r, RefuseAuth, http.StatusUnauthorized, "unauthorized", err.Error())
		return nil, false
	}
	if !claims.MayJoin(room) {
		s.pollError(w, r, RefuseForbidden, http.StatusForbidden, "forbidden", "the token does not allow this room")
		return nil, false
	}
	return &claims, true
}

// pollError answers a refused poll request with an error frame as JSON,
// counted and logged as a refused upgrade is: a long-polling client is
// refused for the same reasons (its room, a limit, its token).
func (s *Server) pollError(w http.ResponseWriter, r *http.Request, reason RefuseReason, status int, code, msg string) {
	s.refusedConn(reason, status, r.RemoteAddr, r.URL.Path, msg)
	writeJSON(w, status, protocol.AppendError(nil, code, msg, nil))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) openPollRoom(w http.ResponseWriter, r *http.Request) (*room.Room, pollCaller, bool) {
	name := r.PathValue("room")
	if !protocol.ValidRoomString(name) {
		s.pollError(w, r, RefuseBadRequest, http.StatusBadRequest, "invalid_room", roomNameRule)
		return nil, pollCaller{}, false
	}
	claims, ok := s.pollAuth(w, r, name)
	if !ok {
		return nil, pollCaller{}, false
	}
	if ref := s.admitURLRoom(name, claims); ref != nil {
		code := "forbidden"
		if ref.reason == RefuseBadRequest {
			code = protocol.CodeInvalidRoom
		}
		s.pollError(w, r, ref.reason, ref.status, code, ref.msg)
		return nil, pollCaller{}, false
	}
	if s.draining.Load() {
		s.pollError(w, r, RefuseShuttingDown, http.StatusServiceUnavailable, "shutting_down", "server shutting down")
		return nil, pollCaller{}, false
	}
	caller, ok := s.pollHooks(w, r, name, claims)
	if !ok {
		return nil, pollCaller{}, false
	}
	open := s.hub.Open
	if r.Method == http.MethodGet {
		open = s.hub.OpenPoll // freed with its last poller when it holds nothing (room.Hub.OpenPoll)
	}
	rm := open([]byte(name))
	if rm == nil {
		s.pollError(w, r, RefuseRoomsFull, http.StatusServiceUnavailable, "rooms_full", "this server holds as many rooms as it may")
		return nil, pollCaller{}, false
	}
	return rm, caller, true
}

// handlePost publishes a chat message sent over HTTP.
func (s *Server) handlePost(w http.ResponseWriter, r *http.Request) {
	rm, caller, ok := s.openPollRoom(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(s.cfg.MaxMessageSize)+1))
	var cut *bodyRefusal
	switch {
	case errors.As(err, &cut): // counted as it was cut
		writeJSON(w, cut.status, protocol.AppendError(nil, cut.reason.String(), cut.msg, nil))
		return
	case err != nil:
		s.pollError(w, r, RefuseBadRequest, http.StatusBadRequest, "invalid_json", "could not read the body")
		return
	}
	s.httpIn.Add(1)
	switch {
	case len(body) > s.cfg.MaxMessageSize:
		s.httpDropped[DropTooBig].Add(1)
		writeJSON(w, http.StatusRequestEntityTooLarge, protocol.AppendError(nil, "too_big", "message larger than the server's maximum", nil))
		return
	case !utf8.Valid(body):
		s.httpDropped[DropInvalid].Add(1)
		writeJSON(w, http.StatusBadRequest, protocol.AppendError(nil, protocol.CodeInvalidJSON, "the body is not UTF-8", nil))
		return
	}
	var f protocol.Frame
	f.SenderOverride = caller.user
	if err := protocol.ParseFrame(body, &f); err != nil {
		s.httpDropped[DropInvalid].Add(1)
		code, msg := protocol.CodeInvalidMessage, err.Error()
		if pe, ok := err.(*protocol.Error); ok {
			code, msg = pe.Code, pe.Message
		}
		writeJSON(w, http.StatusBadRequest, protocol.AppendError(nil, code, msg, &f))
		return
	}
	if f.Kind != protocol.KindMessage || (f.Room != nil && string(f.Room) != rm.Name()) {
		s.httpDropped[DropInvalid].Add(1)
		writeJSON(w, http.StatusBadRequest, protocol.AppendError(nil, protocol.CodeInvalidMessage, "only chat messages for the room of the URL", &f))
		return
	}
	if rm.Options().BackendOnly {
		s.httpDropped[DropBackendOnly].Add(1)
		writeJSON(w, http.StatusForbidden, protocol.AppendError(nil, codeBackendOnly, "only the backend publishes in this room's namespace", &f))
		return
	}
	key := remoteIP(r).String()
	if caller.user != "" {
		key = "sub:" + caller.user
	}
	if !s.postLimit.allow(key, time.Now()) {
		s.httpDropped[DropRateLimit].Add(1)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, protocol.AppendError(nil, protocol.CodeRateLimited, "too many messages per second", &f))
		return
	}
	if body, ok = s.postHook(w, r, rm, caller, body, &f); !ok {
		return
	}
	draft, at := protocol.AppendChatDraft(nil, rm.Name(), time.Now(), &f, body)
	if _, err := s.publishWait(r.Context(), rm, draft, at); err != nil {
		// Refused, or given up with Redis gone (it may still arrive):
		// the poster is told either way, never a 202 for a message
		// that was not ordered.
		s.httpDropped[DropUnavailable].Add(1)
		writeJSON(w, http.StatusServiceUnavailable, protocol.AppendError(nil, protocol.CodeUnavailable, err.Error(), &f))
		return
	}
	resp := []byte(`{"type":"accepted","room":`)
	resp = strconv.AppendQuote(resp, rm.Name())
	if f.HasMessageID {
		resp = append(resp, `,"message_id":`...)
		resp = strconv.AppendUint(resp, f.MessageID, 10)
	}
	writeJSON(w, http.StatusAccepted, append(resp, '}'))
}

// maxDroppedRetries bounds how often an HTTP publish looks its room up
// again when the room was freed as the message arrived (broker.ErrDropped).
const maxDroppedRetries = 3

// errNotOrdered and errNoAnswer say why a POST's message has no seq.
var (
	errNotOrdered = errors.New("the message was not ordered (the cluster's message store became unreachable before it answered, " +
		"or its room was freed as it arrived): it may not reach the room (if it was ordered, it arrives)")
	errNoAnswer = fmt.Errorf("the message got no seq within %s: it may still arrive", apiWait)
)

// publishWait publishes a message of an HTTP request and waits until it is
// ordered: at once on a single node and for an owned room, one round trip
// to the room's owner otherwise. It returns the message's seq, or the
// error that says why it has none: refused (broker.ErrUnavailable,
// ErrOverloaded, here or by the room's owner), dropped (broker.ErrDropped:
// the room was freed as it arrived), given up (errNotOrdered: the owner did not answer), or no
// answer in time (errNoAnswer).
func (s *Server) publishWait(ctx context.Context, rm *room.Room, draft []byte, at int) (uint64, error) {
	id, got := s.waiters.add()
	defer s.waiters.remove(id)
	seq, err := rm.Publish(draft, at, time.Now().UnixNano(), -1, id)
	// A room freed between the request's look-up and its publish (a
	// room of pollers alone, nothing written yet, freed as its last poll
	// ended) took nothing: the message goes to the room made anew. A few
	// tries, each with a room just looked up.
	for try := 0; errors.Is(err, broker.ErrDropped) && try < maxDroppedRetries; try++ {
		if rm = s.hub.Open([]byte(rm.Name())); rm == nil {
			break
		}
		seq, err = rm.Publish(draft, at, time.Now().UnixNano(), -1, id)
	}
	if err != nil || seq > 0 {
		return seq, err
	}
	t := time.NewTimer(apiWait)
	defer t.Stop()
	select {
	case a := <-got:
		switch {
		case a.seq > 0:
			return a.seq, nil
		case errors.Is(a.err, broker.ErrOverloaded):
			return 0, a.err // the owner refused it: nothing was ordered
		}
		return 0, errNotOrdered
	case <-t.C:
		return 0, errNoAnswer
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// handlePoll answers GET /rooms/{room}/messages: the messages after since,
// at once when there are some, else as soon as one comes or wait is over.
func (s *Server) handlePoll(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since uint64
	hasSince := false
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.pollError(w, r, RefuseBadRequest, http.StatusBadRequest, protocol.CodeInvalidMessage, "since must be a sequence number")
			return
		}
		since, hasSince = n, true
	}
	epoch := q.Get("epoch")
	if !protocol.ValidEpoch(epoch) {
		s.pollError(w, r, RefuseBadRequest, http.StatusBadRequest, protocol.CodeInvalidMessage, protocol.EpochRule)
		return
	}
	wait, err := parseWait(q.Get("wait"))
	if err != nil {
		s.pollError(w, r, RefuseBadRequest, http.StatusBadRequest, protocol.CodeInvalidMessage, err.Error())
		return
	}
	rm, _, ok := s.openPollRoom(w, r)
	if !ok {
		return
	}
	s.polls.Add(1)
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	s.waitingPolls.Add(1)
	defer s.waitingPolls.Add(-1)
	res, ok := s.pollUntil(ctx, rm, room.Resume{Since: since, HasSince: hasSince, Epoch: epoch}, nil)
	if !ok {
		s.pollError(w, r, RefuseRoomsFull, http.StatusServiceUnavailable, "rooms_full", "this server holds as many rooms as it may")
		return
	}
	writeJSON(w, http.StatusOK, s.pollBody(rm.Name(), since, res))
}

// pollUntil polls rm at rs until the answer is ready (done, or by default
// messages or a gap to give), waiting for each next change of the room (it
// loads, a message comes) until ctx is done or the server shuts down. A
// room freed meanwhile is opened again; ok is false when it cannot be (the
// node holds as many rooms as it may). rm comes from Hub.OpenPoll:
// pollUntil ends that poll (Hub.LeavePoll), which frees a room that holds
// nothing.
func (s *Server) pollUntil(ctx context.Context, rm *room.Room, rs room.Resume, done func(room.PollResult) bool) (res room.PollResult, ok bool) {
	defer func() {
		if rm != nil {
			s.hub.LeavePoll(rm)
		}
	}()
	for {
		res = rm.Poll(rs, nil)
		if res.Wait == nil || done != nil && done(res) {
			return res, true
		}
		select {
		case <-res.Wait:
			if rm.Closed() {
				s.hub.LeavePoll(rm)
				if rm = s.hub.OpenPoll([]byte(rm.Name())); rm == nil {
					return res, false
				}
			}
		case <-s.stopPolls:
			return res, true
		case <-ctx.Done():
			return res, true
		}
	}
}

// pollBody encodes a poll answer (see messagesBody) and counts its messages.
func (s *Server) pollBody(name string, since uint64, res room.PollResult) []byte {
	s.httpOut.Add(uint64(len(res.Messages)))
	return messagesBody(name, since, res)
}

// messagesBody encodes the messages of a room for a poll or the server
// API's history: the room, its stream and latest seq, the messages as the
// very JSON members receive, and a history_gap when some are gone.
func messagesBody(name string, since uint64, res room.PollResult) []byte {
	b := []byte(`{"room":`)
	b = strconv.AppendQuote(b, name)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendQuote(b, res.Epoch)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, res.Seq, 10)
	if res.Gap {
		b = append(b, `,"history_gap":`...)
		b = protocol.AppendHistoryGap(b, name, since, res.FirstSeq, res.Reset)
	}
	b = append(b, `,"messages":[`...)
	for i, m := range res.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.JSON()...)
	}
	return append(b, "]}"...)
}

// parseWait reads a wait of "25s", "500ms" or "25" (seconds), at most
// maxPollWait; empty means no wait.
func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseFloat(v, 64)
		if nerr != nil {
			return 0, errWait
		}
		d = time.Duration(n * float64(time.Second))
	}
	if d < 0 {
		return 0, errWait
	}
	return min(d, maxPollWait), nil
}

var errWait = &protocol.Error{Code: protocol.CodeInvalidMessage, Message: "wait must be a duration such as 25s, at most 60s"}
