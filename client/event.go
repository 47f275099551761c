package client

import (
	"fmt"
	"time"
)

// Event is something the client received or went through: a *Message, a
// frame of the server (*Joined, *Left, *HistoryGap, *Presence,
// *PresenceChange, *Error), or a
// change of the connection (*State).
type Event interface{ event() }

// Message is a chat message of a room, as the server broadcast it.
type Message struct {
	Room      string
	Seq       uint64    // the room's sequence number, strictly increasing
	ServerAt  time.Time // when the server accepted it
	MessageID uint64    // the sender's own id; 0 when it sent none
	Text      string
	Sender    string // as sent; may be empty
	SentAt    string // the sender's clock, as sent (RFC 3339 by convention)
	// Own is true for the echo of a message this client sent.
	Own bool
}

// Joined confirms that the connection entered a room: its history (History
// messages with Seq ≤ Seq) follows.
type Joined struct {
	Room    string
	Seq     uint64 // the room's latest seq when joining
	Members int    // connections in the room, this one included
	History int    // replayed messages that follow
}

// Left confirms that the connection left a room; no message of it follows.
type Left struct {
	Room string
	Seq  uint64
}

// HistoryGap says that messages asked for (after Since) are no longer in the
// server's history: the replay starts at FirstSeq (0: the server holds
// none). Reset is true when the room was created anew since the client last
// saw it (the server restarted, or the room was freed while empty): its
// sequence numbers started again at 1.
type HistoryGap struct {
	Room     string
	Since    uint64
	FirstSeq uint64
	Reset    bool
}

// Presence tells who is in a room, on every node of a cluster: its
// connections, the users among them (sorted by name) and the connections
// that gave no user.
type Presence struct {
	Room      string
	Members   int
	Users     []User
	Anonymous int
}

// User is a user present in a room and its connections there.
type User struct {
	User        string `json:"user"`
	Connections int    `json:"connections"`
}

// PresenceChange tells that a user's first connection joined a room
// (Joined), or its last one left; sent only with Options.PresenceEvents.
type PresenceChange struct {
	Room   string
	User   string
	Joined bool
}

// Error is a frame the server refused (see docs/protocol.md for the codes),
// or CodeNotSent for a message the client gave up resending.
type Error struct {
	Code      string
	Message   string
	MessageID uint64 // 0 when the refused frame had none
	Room      string // "" when the refused frame had none
}

// CodeNotSent is the Error code of a message written on MaxSendAttempts
// connections that all broke before the server confirmed it.
const CodeNotSent = "not_sent"

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// ConnState is the state of the client's connection.
type ConnState int

// The states a client goes through. Connected follows every successful
// (re)connection once the rooms are joined again and their missed messages
// replayed; Disconnected follows every broken connection; Reconnecting
// announces each wait before a new attempt; Closed is the last event.
const (
	Connected ConnState = iota + 1
	Disconnected
	Reconnecting
	Closed
)

func (s ConnState) String() string {
	switch s {
	case Connected:
		return "connected"
	case Disconnected:
		return "disconnected"
	case Reconnecting:
		return "reconnecting"
	case Closed:
		return "closed"
	}
	return fmt.Sprintf("ConnState(%d)", int(s))
}

// State is a change of the connection's state.
type State struct {
	State   ConnState
	Attempt int           // Reconnecting: attempts since the last good connection, from 1
	Delay   time.Duration // Reconnecting: wait before this attempt
	Err     error         // Disconnected, Reconnecting: what broke; Closed: why the client stopped, nil after Close
}

func (*Message) event()        {}
func (*Joined) event()         {}
func (*Left) event()           {}
func (*HistoryGap) event()     {}
func (*Presence) event()       {}
func (*PresenceChange) event() {}
func (*Error) event()          {}
func (*State) event()          {}
