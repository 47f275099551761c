// Package webhook tells a backend, over HTTP, what happens in scalechat's
// rooms: a room occupied or vacated, a user joined or left a room, a user
// online or offline, a message published. Each event is decided once per
// cluster where the truth is (a Tracker: Memory on a single node, the Redis
// broker's webhook stream in a cluster), and sent by one Dispatcher at a
// time, in order, signed, retried until the backend takes it
// (docs/hooks.md, "Webhooks").
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// The events' names.
const (
	RoomOccupied     = "room_occupied"     // the room's first connection anywhere in the cluster
	RoomVacated      = "room_vacated"      // the room's last connection anywhere closed or left
	MemberJoined     = "member_joined"     // a user's first connection to the room
	MemberLeft       = "member_left"       // a user's last connection to the room
	UserOnline       = "user_online"       // a user's first connection in any room of the cluster
	UserOffline      = "user_offline"      // a user's last connection in any room of the cluster
	MessagePublished = "message_published" // a message ordered in a room whose publish webhook is on
	// Reset starts a new epoch: what the backend knows of who is where is
	// void (Redis lost the webhook state, or the single node started); the
	// occupied, online and joined events of what is there now follow.
	Reset = "reset"
	// Dropped says that Count events were dropped just before it (the
	// queue, or the cluster's stream, was full): within the epoch, what the
	// backend knows of who is where may be wrong from here, and messages
	// are missing. It fetches the current state (the server API's rooms and
	// presence, the rooms' history) and goes on.
	Dropped = "dropped"
)

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256, keyed with the
// shared secret, of TimestampHeader's value, a dot, and the request's body.
const SignatureHeader = "X-Scalechat-Signature"

// TimestampHeader carries when the request was sent, Unix seconds. It is
// signed with the body: a receiver refuses a request whose timestamp is
// further than its tolerance from its clock, so that a request captured
// and replayed later is refused (a replay within the tolerance is a
// duplicate of ids it has seen).
const TimestampHeader = "X-Scalechat-Timestamp"

// DefaultTolerance is how far from its clock a receiver takes a request's
// timestamp, as Stripe's and Svix's receivers do: wide enough for clocks a
// little apart, narrow enough that a receiver keeps the ids it has seen
// for that long to refuse every replay.
const DefaultTolerance = 5 * time.Minute

// The errors of Verify.
var (
	ErrBadSignature = errors.New("the webhook request's signature does not match its body and timestamp")
	ErrStale        = errors.New("the webhook request's timestamp is outside the tolerance: a replay, or a clock far off")
)

// Event is one webhook event.
type Event struct {
	// ID names the event once per cluster: the same event sent twice (a
	// retry, a new dispatcher after a failover) has the same ID.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Epoch names the state the event belongs to: a Reset starts a new one.
	Epoch string `json:"epoch"`
	Room  string `json:"room,omitempty"`
	User  string `json:"user,omitempty"`
	// Seq and Message are a published message's seq in its room and its
	// chat JSON, as members receive it.
	Seq     uint64          `json:"seq,omitempty"`
	Message json.RawMessage `json:"message,omitempty"`
	// Count is a Dropped event's number of events dropped.
	Count uint64 `json:"count,omitempty"`
	// TimeMS is when the event was decided, unix milliseconds.
	TimeMS int64 `json:"time_ms"`
	// Node is the node whose change made the event (for debugging).
	Node string `json:"node,omitempty"`
}

// Body is what one request carries: events in order.
type Body struct {
	Events []Event `json:"events"`
}

// Sign returns the SignatureHeader value of body sent at ts (Unix
// seconds, TimestampHeader's value) under secret.
func Sign(secret, body []byte, ts int64) string {
	m := hmac.New(sha256.New, secret)
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks what a receiver must before it trusts a request: that sig
// (SignatureHeader) signs body and ts (TimestampHeader) under secret,
// compared in constant time, and that ts is within tolerance of now. It
// returns ErrBadSignature or ErrStale.
func Verify(secret, body []byte, ts, sig string, now time.Time, tolerance time.Duration) error {
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || !hmac.Equal([]byte(sig), []byte(Sign(secret, body, t))) {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(t, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}

// Tracker is where a node reports what its connections do; it decides the
// events. Its methods must not block: they are called on the event loops'
// paths.
type Tracker interface {
	// Presence says this node now has count connections of user ("" for
	// none given) in room.
	Presence(room, user string, count int)
	// Published says message (the chat JSON) was ordered in room as seq.
	Published(room string, seq uint64, message []byte)
}

// Source is the ordered log of decided events that a Dispatcher sends.
type Source interface {
	// Next waits until there are events after the last committed one (and,
	// in a cluster, until this node is the dispatcher) and returns up to
	// max of them, in order.
	Next(ctx context.Context, max int) ([]Event, error)
	// Commit records that evs, the last batch Next returned, reached the
	// backend: Next goes on after them.
	Commit(ctx context.Context, evs []Event) error
	// Stats returns the source's counters: queued and dropped.
	Stats() Stats
}

// ErrNotDispatcher says that this node lost the dispatcher's lease before it
// committed: another node sends from the last committed event, so the
// backend may get some events twice (the same IDs).
var ErrNotDispatcher = errors.New("this node is no longer the cluster's webhook dispatcher")

// Stats counts a node's webhooks.
type Stats struct {
	Queued int64 // events (or, in a cluster, changes) waiting on this node
	// QueuedBytes is what they hold, roughly (strings, messages, structs).
	QueuedBytes int64
	Sent        uint64 // events the backend took (2xx)
	Retried     uint64 // requests sent again after a failure
	Failed      uint64 // requests that failed (an error, a timeout or a non-2xx answer)
	Dropped     uint64 // events never queued: the queue (or the cluster's stream) was full
	// Filtered counts events left unsent by design (DispatcherConfig.Send:
	// a namespace's webhooks list), not lost.
	Filtered uint64
}

// setCount records a node's count of user's connections in room in state
// (room → user → count), forgetting a user at 0 and a room with none.
func setCount(state map[string]map[string]int, room, user string, count int) {
	users := state[room]
	switch {
	case count > 0 && users == nil:
		state[room] = map[string]int{user: count}
	case count > 0:
		users[user] = count
	default:
		delete(users, user)
		if len(users) == 0 {
			delete(state, room)
		}
	}
}

// queueBounds fills the bounds of a cluster state's queues left at 0: the
// events its stream holds unsent, and the changes that wait on this node
// while the store is unreachable.
func queueBounds(stream, pending *int, streamBytes, pendingBytes *int64) {
	if *stream <= 0 {
		*stream = 100000
	}
	if *pending <= 0 {
		*pending = 100000
	}
	if *streamBytes <= 0 {
		*streamBytes = DefaultQueueBytes
	}
	if *pendingBytes <= 0 {
		*pendingBytes = DefaultQueueBytes
	}
}
