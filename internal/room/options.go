package room

import "time"

// Options are what a room takes from its namespace (see
// internal/namespace): resolved once, when the room is made, by
// Config.Options, and never changed while the room lives, so that the
// message path reads them without a lock or a lookup.
type Options struct {
	// History is how many messages the room keeps (0: none).
	History int
	// HistoryTTL drops the room's history once its last message is this
	// old, when a member joins or a poll reads it (0: kept while the room
	// lives).
	HistoryTTL time.Duration
	// NoPresence: no user is counted in the room (AddUser does nothing),
	// so it has no presence and no presence events.
	NoPresence bool
	// NoJoinLeave: no presence_join or presence_leave event is sent to the
	// room's members.
	NoJoinLeave bool
	// BackendOnly: only the backend (the server API) may publish; the
	// server refuses its clients' messages (the room does not know who
	// publishes).
	BackendOnly bool
	// MaxMembers caps the room's connections (0: no cap): those on this
	// node and, with presence on, those the other nodes report.
	MaxMembers int
	// PublishHook and PublishWebhook are the server's, resolved with the
	// rest so that its message path reads a field, not the namespaces: a
	// member's message waits for the backend's publish hook, an ordered
	// one makes a message_published webhook event. The room calls neither.
	PublishHook, PublishWebhook bool
}

// Options returns the options the room was made with.
func (r *Room) Options() *Options { return &r.opts }

// options resolves the options of a new room called name: Config.Options,
// or the hub's defaults without it.
func (h *Hub) options(name string) Options {
	if h.resolve != nil {
		return h.resolve(name)
	}
	return Options{History: h.history}
}

// expireLocked drops the room's history when its last message is older
// than the room's HistoryTTL. The caller holds r.mu.
func (r *Room) expireLocked(now time.Time) {
	if r.opts.HistoryTTL == 0 || r.hist.n == 0 || now.Sub(r.lastMsg) < r.opts.HistoryTTL {
		return
	}
	for r.hist.n > 0 {
		r.countLocked(entry{}, r.hist.dropOldest())
		r.hub.historyEntries.Add(-1)
	}
}

// fullLocked reports whether one more member would pass the room's
// MaxMembers: its members here and, with presence on, the connections the
// other nodes report. The caller holds r.mu.
func (r *Room) fullLocked() bool {
	if r.opts.MaxMembers == 0 {
		return false
	}
	n := r.members
	for _, users := range r.pres.nodes {
		for _, c := range users {
			n += c
		}
	}
	return n >= r.opts.MaxMembers
}
