//go:build linux

package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/namespace"
	"github.com/scalechat/scalechat/internal/room"
)

// Refusal codes of the error frames (and HTTP answers) of namespaces'
// rules, documented in docs/config.md.
const (
	codeBackendOnly = "backend_only" // a client's message in a namespace where only the backend publishes
	codeRoomFull    = "room_full"    // a join past the namespace's max_members
	codePresenceOff = "presence_off" // a presence request in a namespace without presence
)

// Validate checks a configuration as New does, without starting anything
// (scalechat serve --check-config).
func (c Config) Validate() error {
	c.fill()
	return c.validate()
}

// namespaceErrors checks what the namespaces ask of the rest of the
// configuration.
func (c *Config) namespaceErrors() []error {
	var errs []error
	if name, ok := c.Namespaces.NeedsToken(); ok && c.Auth == nil {
		errs = append(errs, fmt.Errorf("namespace %q needs a token naming its rooms (join_token), but the server checks no token: set --auth-jwt-secret, --auth-jwt-public-key or --auth-jwks-file", name))
	}
	if name, ok := c.Namespaces.NeedsJoinHook(); ok && c.Hooks.JoinURL == "" {
		errs = append(errs, fmt.Errorf("namespace %q needs the join hook's yes for each join (join_hook), but the server calls no join hook: set --hook-join", name))
	}
	return errs
}

// roomOptions gives a new room its namespace's options (room.Config.Options),
// the flags' defaults where the namespace sets none, and whether its
// messages go through the publish hook and make message_published events:
// resolved once here, read per message. A room whose namespace is unknown
// never gets here: every entry refuses it first (admitRoom).
func (s *Server) roomOptions(name string) room.Options {
	o, ok := s.cfg.Namespaces.Lookup(name)
	if !ok {
		o = &namespace.Options{}
	}
	ro := room.Options{History: s.cfg.History, HistoryTTL: o.HistoryTTL, NoPresence: o.NoPresence, NoJoinLeave: o.NoJoinLeave,
		BackendOnly: o.Publish == namespace.PublishBackend, MaxMembers: o.MaxMembers,
		PublishHook:    s.hooks.On(hooks.Publish) && o.HasHook("publish"),
		PublishWebhook: s.webhooks != nil && s.webhooks.cfg.PublishRoom(name)}
	if o.HistorySet {
		ro.History = o.History
	}
	return ro
}

// brokerRoom gives the Redis broker a room's history size and TTL
// (broker.Config.Room): its namespace's history_ttl replaces --redis-ttl.
func (s *Server) brokerRoom(name string) broker.RoomConfig {
	o := s.roomOptions(name)
	return broker.RoomConfig{History: o.History, TTL: o.HistoryTTL}
}

// joinHook reports whether a join of the room called name asks the join
// hook: the server calls one, and the room's namespace (if any) has it
// (namespace.Options.HasHook). A lookup once per join, never per message.
func (s *Server) joinHook(name string) bool {
	if !s.hooks.On(hooks.Join) {
		return false
	}
	o, ok := s.cfg.Namespaces.Lookup(name)
	return !ok || o.HasHook("join")
}

// errUnknownNamespace and errNeedsToken say why admitRoom refused a room.
var (
	errUnknownNamespace = errors.New("unknown namespace")
	errNeedsToken       = errors.New("token does not name the room")
)

// admitRoom checks a join of the room called name against its namespace:
// the namespace is configured, and when it asks for a token naming the
// room, the connection's token lists it (tokenRooms, with limited: the
// token has a rooms claim). It returns nil, or an error wrapping
// errUnknownNamespace or errNeedsToken whose text the client is told.
func (s *Server) admitRoom(name string, tokenRooms []string, limited bool) error {
	o, ok := s.cfg.Namespaces.Lookup(name)
	switch {
	case !ok:
		return fmt.Errorf("%w: namespace %q is not configured on this server", errUnknownNamespace, namespace.Of(name))
	case o.JoinToken && (!limited || !slices.Contains(tokenRooms, name)):
		return fmt.Errorf("%w: namespace %q needs a token whose rooms claim names the room", errNeedsToken, o.Name)
	}
	return nil
}

// namespaceKnown reports whether a room's namespace is configured, for the
// entries that join nothing (the server API, polls before admitRoom).
func (s *Server) namespaceKnown(name string) bool {
	_, ok := s.cfg.Namespaces.Lookup(name)
	return ok
}

// admitURLRoom checks the room of an upgrade's URL against its namespace
// (admitRoom): 400 for a namespace not configured, 403 for a token that
// does not name a room whose namespace needs one.
func (s *Server) admitURLRoom(name string, claims *auth.Claims) *refusal {
	if name == "" { // /echo
		return nil
	}
	var rooms []string
	if claims != nil {
		rooms = claims.Rooms
	}
	err := s.admitRoom(name, rooms, rooms != nil)
	switch {
	case errors.Is(err, errUnknownNamespace):
		return &refusal{reason: RefuseBadRequest, status: http.StatusBadRequest, msg: err.Error()}
	case err != nil:
		return &refusal{reason: RefuseForbidden, status: http.StatusForbidden, msg: err.Error()}
	}
	return nil
}
