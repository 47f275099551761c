//go:build linux

package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/namespace"
	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/version"
	"github.com/scalechat/scalechat/internal/ws"
)

// The server API (docs/api.md): what a backend asks of the chat, with the
// API key, JSON in and out, on the main listener:
//
//	POST /api/rooms/{room}/publish          publish a message; answers its seq
//	GET  /api/rooms                         rooms with members, on every node
//	GET  /api/rooms/{room}/presence         who is in a room, on every node
//	GET  /api/rooms/{room}/history          messages after since, at most limit
//	POST /api/users/{user}/disconnect       close every connection of a user
//	POST /api/connections/{id}/disconnect   close one connection
//	GET  /api/node                          this node and its cluster
//
// In a cluster each request goes through the broker, so any node answers
// for all of them.

// CloseDisconnected is the close code of a connection closed through the
// server API. A client should not reconnect on its own after it.
const CloseDisconnected ws.StatusCode = 4001

// MinAPIKey is the shortest API key the server accepts.
const MinAPIKey = 16

// apiWait bounds how long a request waits for the broker: a publish for its
// seq, a history for its room to load.
const apiWait = 5 * time.Second

// maxHistoryLimit bounds the messages of one history answer.
const maxHistoryLimit = 1000

func (s *Server) routeAPI(mux *http.ServeMux) {
	// Whatever else comes under /api/ gets a JSON answer too, not the
	// page's. One pattern per method: "/api/" would conflict with "GET /".
	rest := func(f http.HandlerFunc) {
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			mux.HandleFunc(m+" /api/{rest...}", f)
		}
	}
	if s.cfg.APIKey == "" {
		rest(func(w http.ResponseWriter, _ *http.Request) {
			apiError(w, http.StatusNotFound, "api_off", "the server API is off: start the server with --api-key or --api-key-file")
		})
		return
	}
	h := func(pattern string, f http.HandlerFunc) { mux.HandleFunc(pattern, s.apiAuth(f)) }
	h("POST /api/rooms/{room}/publish", s.apiPublish)
	h("GET /api/rooms", s.apiRooms)
	h("GET /api/rooms/{room}/presence", s.apiPresence)
	h("GET /api/rooms/{room}/history", s.apiHistory)
	h("POST /api/users/{user}/disconnect", s.apiDisconnectUser)
	h("POST /api/connections/{id}/disconnect", s.apiDisconnectConn)
	h("GET /api/node", s.apiNode)
	rest(s.apiAuth(func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("the server API has no %s %s (see docs/api.md)", r.Method, r.URL.Path))
	}))
}

// apiAuth lets through the requests that carry the API key, as
// "Authorization: Bearer KEY" or "X-API-Key: KEY". The comparison takes the
// same time whatever the key sent.
func (s *Server) apiAuth(next http.HandlerFunc) http.HandlerFunc {
	want := sha256.Sum256([]byte(s.cfg.APIKey))
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-Key")
		if h := r.Header.Get("Authorization"); h != "" {
			scheme, k, ok := strings.Cut(h, " ")
			if ok && strings.EqualFold(scheme, "Bearer") {
				key = strings.TrimSpace(k)
			}
		}
		got := sha256.Sum256([]byte(key))
		if key == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			s.apiRequests[apiUnauthorized].Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer realm="scalechat api"`)
			apiError(w, http.StatusUnauthorized, "unauthorized", "this request needs the server's API key, as Authorization: Bearer <key> or X-API-Key: <key>")
			return
		}
		s.apiRequests[apiOK].Add(1)
		next(w, r)
	}
}

// API request outcomes, counted for the metrics.
const (
	apiOK = iota
	apiUnauthorized
	apiBadRequest
	apiOutcomes
)

func apiError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{code, msg})
	writeJSON(w, status, b)
}

func (s *Server) apiBad(w http.ResponseWriter, msg string) {
	s.apiRequests[apiBadRequest].Add(1)
	apiError(w, http.StatusBadRequest, "bad_request", msg)
}

func apiJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal", "could not encode the answer")
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// apiRoom returns the room of the URL, or answers 400 and returns "".
func (s *Server) apiRoom(w http.ResponseWriter, r *http.Request) string {
	name := r.PathValue("room")
	if !protocol.ValidRoomString(name) {
		s.apiBad(w, "the room name is invalid: "+roomNameRule)
		return ""
	}
	if !s.namespaceKnown(name) {
		s.apiBad(w, fmt.Sprintf("namespace %q is not configured on this server", namespace.Of(name)))
		return ""
	}
	return name
}

// PublishResult answers a publish through the API.
type PublishResult struct {
	Room string `json:"room"`
	Seq  uint64 `json:"seq"`
}

// apiPublish publishes the chat message of the body into the room, as if a
// member had sent it (its sender is kept as given: the backend is
// trusted), and answers once the message has its seq.
func (s *Server) apiPublish(w http.ResponseWriter, r *http.Request) {
	name := s.apiRoom(w, r)
	if name == "" {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(s.cfg.MaxMessageSize)+1))
	switch {
	case err != nil:
		s.apiBad(w, "could not read the body")
		return
	case len(body) > s.cfg.MaxMessageSize:
		s.apiRequests[apiBadRequest].Add(1)
		apiError(w, http.StatusRequestEntityTooLarge, "too_big", fmt.Sprintf("the message is larger than the server's maximum of %d bytes", s.cfg.MaxMessageSize))
		return
	case !utf8.Valid(body):
		s.apiBad(w, "the body is not UTF-8")
		return
	}
	var f protocol.Frame
	if err := protocol.ParseFrame(body, &f); err != nil {
		msg := err.Error()
		if pe, ok := err.(*protocol.Error); ok {
			msg = pe.Message
		}
		s.apiBad(w, "the body is not a chat message: "+msg)
		return
	}
	if f.Kind != protocol.KindMessage || (f.Room != nil && string(f.Room) != name) {
		s.apiBad(w, `the body must be a chat message such as {"text":"hello"}, for the room of the URL`)
		return
	}
	if s.draining.Load() {
		apiError(w, http.StatusServiceUnavailable, "shutting_down", "this node is shutting down: publish through another")
		return
	}
	rm := s.hub.Open([]byte(name))
	if rm == nil {
		apiError(w, http.StatusServiceUnavailable, "rooms_full", "this node holds as many rooms as it may")
		return
	}
	draft, at := protocol.AppendChatDraft(nil, name, time.Now(), &f, body)
	seq, err := s.publishWait(r.Context(), rm, draft, at)
	if !errors.Is(err, broker.ErrUnavailable) && !errors.Is(err, broker.ErrOverloaded) {
		s.apiPublished.Add(1) // taken by the broker (its answer may still be a refusal, or none in time)
	}
	switch {
	case err == nil:
		apiJSON(w, PublishResult{Room: name, Seq: seq})
	case errors.Is(err, errNotOrdered), errors.Is(err, broker.ErrDropped):
		apiError(w, http.StatusServiceUnavailable, "dropped", "the message was not ordered (its room was freed as it arrived, or Redis became unreachable): publish again")
	case errors.Is(err, errNoAnswer):
		apiError(w, http.StatusGatewayTimeout, "timeout", fmt.Sprintf("the message got no seq within %s; it may still be delivered", apiWait))
	case r.Context().Err() != nil:
	default:
		apiError(w, http.StatusServiceUnavailable, protocol.CodeUnavailable, err.Error())
	}
}

// RoomInfo is a room in the API's room list.
type RoomInfo struct {
	Room    string `json:"room"`
	Members int    `json:"members"`
}

// directory returns the broker's view of every node's rooms, or false on a
// single node, whose rooms know their members themselves.
func (s *Server) directory() (broker.Cluster, bool) {
	d, ok := s.hub.Cluster()
	return d, ok
}

// roomCounts returns the connections in every room with members: on every
// node in a cluster, this node's otherwise.
func (s *Server) roomCounts(ctx context.Context) (map[string]int, error) {
	d, ok := s.directory()
	if !ok {
		return s.hub.Occupied(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiWait)
	defer cancel()
	occ, err := d.Occupancy(ctx, "")
	if err != nil {
		return nil, err
	}
	counts := make(map[string]int, len(occ))
	for name, users := range occ {
		for _, n := range users {
			counts[name] += n
		}
	}
	return counts, nil
}

// roomUsers returns the connections of each user in the room ("" for the
// anonymous ones): on every node in a cluster, this node's otherwise.
func (s *Server) roomUsers(ctx context.Context, name string) (map[string]int, error) {
	if d, ok := s.directory(); ok {
		ctx, cancel := context.WithTimeout(ctx, apiWait)
		defer cancel()
		occ, err := d.Occupancy(ctx, name)
		return occ[name], err
	}
	users := make(map[string]int)
	if rm := s.hub.Lookup([]byte(name)); rm != nil {
		_, us, anon := rm.Presence()
		for _, u := range us {
			users[u.User] = u.Connections
		}
		if anon > 0 {
			users[""] = anon
		}
	}
	return users, nil
}

func (s *Server) apiRooms(w http.ResponseWriter, r *http.Request) {
	counts, err := s.roomCounts(r.Context())
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, "broker", "the cluster's rooms could not be read: "+err.Error())
		return
	}
	list := make([]RoomInfo, 0, len(counts))
	for name, n := range counts {
		list = append(list, RoomInfo{Room: name, Members: n})
	}
	slices.SortFunc(list, func(a, b RoomInfo) int {
		if a.Members != b.Members {
			return b.Members - a.Members
		}
		return strings.Compare(a.Room, b.Room)
	})
	apiJSON(w, struct {
		Rooms []RoomInfo `json:"rooms"`
	}{list})
}

// PresenceInfo answers a room's presence through the API, as the
// protocol's presence frame does.
type PresenceInfo struct {
	Room      string            `json:"room"`
	Members   int               `json:"members"`
	Users     []UserConnections `json:"users"`
	Anonymous int               `json:"anonymous"`
}

// UserConnections is a user in a room, and how many connections it has
// there.
type UserConnections struct {
	User        string `json:"user"`
	Connections int    `json:"connections"`
}

func (s *Server) apiPresence(w http.ResponseWriter, r *http.Request) {
	name := s.apiRoom(w, r)
	if name == "" {
		return
	}
	if s.roomOptions(name).NoPresence {
		s.apiRequests[apiBadRequest].Add(1)
		apiError(w, http.StatusConflict, codePresenceOff, "presence is off in this room's namespace")
		return
	}
	users, err := s.roomUsers(r.Context(), name)
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, "broker", "the room's presence could not be read: "+err.Error())
		return
	}
	p := PresenceInfo{Room: name, Users: []UserConnections{}}
	for user, n := range users {
		p.Members += n
		if user == "" {
			p.Anonymous = n
			continue
		}
		p.Users = append(p.Users, UserConnections{User: user, Connections: n})
	}
	slices.SortFunc(p.Users, func(a, b UserConnections) int { return strings.Compare(a.User, b.User) })
	apiJSON(w, p)
}

// apiHistory answers the room's messages after since (the first limit of
// them), or its last limit messages without since, as members receive
// them, with a history_gap when some asked for are gone.
func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request) {
	name := s.apiRoom(w, r)
	if name == "" {
		return
	}
	q := r.URL.Query()
	rs := room.Resume{Epoch: q.Get("epoch")}
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.apiBad(w, "since must be a seq: an integer from 0")
			return
		}
		rs.Since, rs.HasSince = n, true
	}
	if !protocol.ValidEpoch(rs.Epoch) {
		s.apiBad(w, protocol.EpochRule)
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistoryLimit {
			s.apiBad(w, fmt.Sprintf("limit must be an integer from 1 to %d", maxHistoryLimit))
			return
		}
		limit = n
	}
	rm := s.hub.OpenPoll([]byte(name)) // pollUntil leaves it: a room that holds nothing is not kept
	if rm == nil {
		apiError(w, http.StatusServiceUnavailable, "rooms_full", "this node holds as many rooms as it may")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiWait)
	defer cancel()
	res, ok := s.pollUntil(ctx, rm, rs, func(res room.PollResult) bool { return res.Epoch != "" })
	switch {
	case !ok:
		apiError(w, http.StatusServiceUnavailable, "rooms_full", "this node holds as many rooms as it may")
		return
	case res.Epoch == "":
		apiError(w, http.StatusGatewayTimeout, "timeout", fmt.Sprintf("the room did not load from the broker within %s", apiWait))
		return
	}
	msgs := res.Messages
	if len(msgs) > limit {
		if rs.HasSince {
			msgs = msgs[:limit]
		} else {
			msgs = msgs[len(msgs)-limit:]
		}
	}
	res.Messages = msgs
	writeJSON(w, http.StatusOK, messagesBody(name, rs.Since, res))
}

// disconnectRequest is the optional body of a disconnect.
type disconnectRequest struct {
	Reason string `json:"reason"`
}

// readDisconnect reads the optional reason of a disconnect; it answers 400
// and reports false for a bad body.
func (s *Server) readDisconnect(w http.ResponseWriter, r *http.Request) (string, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err != nil {
		s.apiBad(w, "could not read the body")
		return "", false
	}
	var d disconnectRequest
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &d); err != nil {
			s.apiBad(w, `the body must be empty or {"reason":"..."}`)
			return "", false
		}
	}
	if d.Reason == "" {
		d.Reason = "disconnected by the server"
	}
	if len(d.Reason) > 120 || !utf8.ValidString(d.Reason) {
		s.apiBad(w, "the reason must be at most 120 bytes of UTF-8 (it goes into the close frame)")
		return "", false
	}
	return d.Reason, true
}

func (s *Server) apiDisconnectUser(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	if !protocol.ValidUser(user) || user == "" {
		s.apiBad(w, "the user is invalid: "+protocol.UserRule)
		return
	}
	s.apiDisconnect(w, r, broker.Disconnect{User: user})
}

func (s *Server) apiDisconnectConn(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, _, ok := parseConnID(id); !ok {
		s.apiBad(w, "the connection id is invalid: it is the connection field of a joined frame, such as k2m4q9x0-17")
		return
	}
	s.apiDisconnect(w, r, broker.Disconnect{Conn: id})
}

func (s *Server) apiDisconnect(w http.ResponseWriter, r *http.Request, d broker.Disconnect) {
	reason, ok := s.readDisconnect(w, r)
	if !ok {
		return
	}
	d.Reason = reason
	ctx, cancel := context.WithTimeout(r.Context(), apiWait)
	defer cancel()
	c, ok := s.hub.Cluster()
	if !ok {
		s.disconnect(d) // a single node: its own connections alone
		apiJSON(w, struct{}{})
		return
	}
	if err := c.Disconnect(ctx, d); err != nil {
		apiError(w, http.StatusServiceUnavailable, "broker", err.Error())
		return
	}
	apiJSON(w, struct{}{})
}

// NodeInfo answers GET /api/node.
type NodeInfo struct {
	Node        string   `json:"node"`    // the name the node announces, e.g. host:port
	ID          string   `json:"id"`      // the prefix of its connection ids
	Version     string   `json:"version"` // the build
	Uptime      float64  `json:"uptime_seconds"`
	Connections int64    `json:"connections"`
	Rooms       int64    `json:"rooms"` // rooms held, empty ones in their grace period included
	Cluster     bool     `json:"cluster"`
	BrokerUp    bool     `json:"broker_up"`
	Nodes       []string `json:"nodes"` // the live nodes of the cluster, this one included
}

func (s *Server) apiNode(w http.ResponseWriter, r *http.Request) {
	s.announceMu.Lock()
	name := s.name
	s.announceMu.Unlock()
	info := NodeInfo{
		Node: name, ID: s.id, Version: version.String(), Uptime: time.Since(s.started).Seconds(),
		Connections: s.conns.Load(), Rooms: s.hub.Rooms(), Cluster: s.cfg.clustered(), BrokerUp: s.broker.Stats().InStep,
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiWait)
	defer cancel()
	nodes, err := s.ClusterNodes(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("api: cluster nodes", "err", err)
	}
	for n := range nodes {
		info.Nodes = append(info.Nodes, n)
	}
	slices.Sort(info.Nodes)
	apiJSON(w, info)
}

// connID names connection n of this node in the API and joined frames.
func (s *Server) connID(n uint64) string { return s.id + "-" + strconv.FormatUint(n, 10) }

// parseConnID splits a connection id into its node's id and number.
func parseConnID(id string) (node string, n uint64, ok bool) {
	node, num, found := strings.Cut(id, "-")
	if !found || node == "" || len(node) > 32 {
		return "", 0, false
	}
	for _, c := range node {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return "", 0, false
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	return node, n, err == nil && n > 0
}

// disconnect closes the connections of this node that d names (the hub
// calls it for every disconnect the broker brings).
func (s *Server) disconnect(d broker.Disconnect) {
	var n uint64
	if d.Conn != "" {
		node, num, ok := parseConnID(d.Conn)
		if !ok || node != s.id {
			return // another node's
		}
		n = num
	} else if d.User == "" {
		return
	}
	for _, l := range s.loops {
		l.command(command{kind: cmdDisconnect, disc: d, id: n})
	}
}

// disconnect closes the connections of this loop that d names: the one
// numbered id, or all of d.User's.
func (l *loop) disconnect(d broker.Disconnect, id uint64) {
	for _, c := range l.conns {
		if c == nil || c.state != stateOpen || c.echo {
			continue
		}
		if id != 0 && c.id == id || id == 0 && c.user == d.User {
			c.closeWith(CloseDisconnected, d.Reason)
		}
	}
}
