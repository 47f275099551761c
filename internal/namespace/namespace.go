// Package namespace holds the options of room namespaces: a room called
// "ns:name" takes the options of namespace "ns" from the server's
// configuration file (docs/config.md), a room without a colon the defaults
// of the serve flags. It parses and validates the file's `namespaces:`
// section, with the line of every error, and resolves a room's options; it
// knows neither rooms nor connections.
package namespace

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Publish says who may publish in a namespace's rooms.
type Publish uint8

// Who may publish.
const (
	PublishClients Publish = iota // members (and the server API)
	PublishBackend                // the server API alone: a client's message is refused
)

func (p Publish) String() string {
	if p == PublishBackend {
		return "backend"
	}
	return "clients"
}

// Options are one namespace's settings, or the defaults of rooms without
// a namespace. The zero value is no namespace's options: history from the
// --history flag (HistorySet false), presence and its events on, clients
// publish, joins open, no member cap.
type Options struct {
	// Name is the namespace's name; "" for rooms without one.
	Name string
	// History is the messages kept per room, when HistorySet; else the
	// server's --history applies.
	History    int
	HistorySet bool
	// HistoryTTL drops a room's history once its last message is this old
	// (and, in a cluster, its keys in Redis after that long without
	// messages); 0: the server's defaults (kept while the room lives;
	// --redis-ttl).
	HistoryTTL time.Duration
	// NoPresence turns presence off: no user is counted, the presence
	// frame and the API answer an empty room, and no presence event is
	// sent.
	NoPresence bool
	// NoJoinLeave turns presence_join and presence_leave events off
	// (presence itself may still be asked).
	NoJoinLeave bool
	// Publish says who may publish.
	Publish Publish
	// JoinToken: a join needs a token whose "rooms" claim names the room.
	JoinToken bool
	// JoinHook: a join needs the backend's join hook to allow it, whatever
	// Hooks says (the server refuses a configuration without a join hook).
	JoinHook bool
	// MaxMembers caps a room's members (0: no cap).
	MaxMembers int
	// Hooks are the backend hooks that apply to the namespace's rooms
	// (HookNames), when HooksSet: a namespace without the key gets every
	// hook the server calls, one with an empty list none (HasHook).
	Hooks    []string
	HooksSet bool
	// Webhooks are the webhook events sent for the namespace's rooms
	// (WebhookEvents), when WebhooksSet; without the key, the server's
	// defaults (HasWebhook).
	Webhooks    []string
	WebhooksSet bool
}

// Limits of a namespace's numbers, checked by Parse.
const (
	MaxHistory    = 100000
	MaxMembersCap = 10000000
	MaxHistoryTTL = 365 * 24 * time.Hour
)

// HookNames are the backend hooks a namespace may name: those that act on
// a room (connect acts on a connection, before any room).
var HookNames = []string{"join", "publish"}

// WebhookEvents are the webhook events a namespace may name: those about a
// room (user_online and user_offline are about a user, in no room).
// They are spelled as the backend receives them (internal/webhook).
var WebhookEvents = []string{"room_occupied", "room_vacated", "member_joined", "member_left", "message_published"}

// Set is the namespaces of a configuration, by name.
type Set map[string]*Options

// Of returns the name of the namespace of a room: what comes before its
// first colon, "" when it has none.
func Of(room string) string {
	ns, _, ok := strings.Cut(room, ":")
	if !ok {
		return ""
	}
	return ns
}

// Lookup returns the options of room: its namespace's, the zero Options
// for a room without a namespace, and false for a room whose namespace is
// not in the set (such a room is refused: a namespace mistyped must not
// fall back to looser rules).
func (s Set) Lookup(room string) (*Options, bool) {
	ns := Of(room)
	if ns == "" {
		return &noNamespace, true
	}
	o, ok := s[ns]
	return o, ok
}

// noNamespace are the options of rooms without a namespace; never changed.
var noNamespace Options

// NeedsToken reports whether any namespace needs a token naming its rooms,
// and the first such namespace's name (for the error when the server
// checks no token).
func (s Set) NeedsToken() (string, bool) {
	for _, name := range slices.Sorted(maps.Keys(s)) {
		if s[name].JoinToken {
			return name, true
		}
	}
	return "", false
}

// NeedsJoinHook reports whether any namespace needs the join hook's yes
// (JoinHook), and the first such namespace's name (for the error when the
// server calls no join hook).
func (s Set) NeedsJoinHook() (string, bool) {
	for _, name := range slices.Sorted(maps.Keys(s)) {
		if s[name].JoinHook {
			return name, true
		}
	}
	return "", false
}

// HasHook reports whether the backend hook called name (HookNames) applies
// to the namespace's rooms, when the server calls it at all: every hook
// without a hooks key (so that adding a namespace never turns a room's
// join hook off), else those listed; the join hook always where JoinHook.
// The server resolves it once per room, not per message.
func (o *Options) HasHook(name string) bool {
	if name == "join" && o.JoinHook {
		return true
	}
	return !o.HooksSet || slices.Contains(o.Hooks, name)
}

// HasWebhook reports whether the webhook event (WebhookEvents) is sent for
// the namespace's rooms: when the namespace has a webhooks key, whether it
// lists the event; else byDefault, the server's default for the event (on
// for the room events, --webhook-publish for message_published).
func (o *Options) HasWebhook(event string, byDefault bool) bool {
	if !o.WebhooksSet {
		return byDefault
	}
	return slices.Contains(o.Webhooks, event)
}
