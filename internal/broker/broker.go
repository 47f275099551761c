// Package broker ties the rooms of scalechat nodes together. A Broker gives
// each room's messages one order (their seq), keeps the history that nodes
// load a room from, and brings every message to each node subscribed to its
// room, which hands it to its members. The node's rooms are the broker's
// Handler.
//
// Two brokers implement it: Memory, for a single node, where publishing is
// ordering and delivering at once, and Redis, for a cluster of nodes behind
// a load balancer (docs/cluster.md).
package broker

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"strings"

	"github.com/scalechat/scalechat/internal/histogram"
)

// Broker orders, stores and carries the messages of rooms: the message side
// of a node's engine, which every node has (one node: Memory). A broker of
// several nodes is also a Cluster.
type Broker interface {
	// Publish sends a message into its room and returns its result: the
	// seq it got when it was ordered before Publish returned (on a single
	// node; in a cluster, in a room this node orders), or 0 when it is on
	// its way to the room's owner on another node, whose answer reaches
	// Handler.Settled with p, once. The broker brings the message to every
	// node subscribed to the room (Handler.DeliverMany). It must not block
	// and does not keep p's slices after it returns. It returns
	// ErrUnavailable, and delivers nothing, when the room cannot be given
	// one order now (a cluster's broker cut off from Redis); ErrOverloaded
	// past the cluster's capacity; ErrDropped when the room was freed as
	// the message arrived.
	Publish(p Publication) (seq uint64, err error)
	// Subscribe starts bringing room's messages to this node; the broker
	// answers once with Handler.Loaded.
	Subscribe(room string)
	// Unsubscribe stops bringing room's messages to this node.
	Unsubscribe(room string)
	// Run works until ctx is done, then releases the broker's connections.
	Run(ctx context.Context) error
	// Stats returns the broker's state (Up, InStep) and counters. It takes
	// no lock: the rooms call it under a room's lock, the server's
	// readiness check at every probe.
	Stats() Stats
}

// ErrUnavailable refuses a publish that a cut-off node cannot order: its
// room may have members on other nodes, and a seq handed out here alone
// could name another message there (docs/cluster.md, "Redis outages").
var ErrUnavailable = errors.New("the cluster's message store is unreachable: messages to rooms shared with other nodes are refused until it is back")

// ErrOverloaded refuses a publish that would wait longer than the broker's
// bound (the Redis broker's Config.MaxWait) to reach the other nodes: past
// its capacity the cluster tells senders at once instead of queueing
// seconds of latency. Nothing of the message was sent.
var ErrOverloaded = errors.New("the cluster is over capacity: messages to rooms shared with other nodes wait too long to go out, and new ones are refused until they catch up; send it again later")

// ErrDropped refuses a publish whose room was freed on this node as it
// arrived (its last member left, or the cluster moved its stream): nothing
// of it was ordered, and publishing it again makes the room anew.
var ErrDropped = errors.New("the room was freed as the message arrived: publish it again")

// Disconnect names connections to close on every node: all of User's, or
// the one called Conn (as the node that holds it named it).
type Disconnect struct {
	User   string
	Conn   string
	Reason string
}

// Cluster is what a broker of several nodes gives besides their messages:
// the nodes, who is in the rooms across them, and what is asked of all of
// them. The Redis broker is one; a single node has none (broker.Memory):
// its rooms and its server answer alone.
type Cluster interface {
	// Announce makes this node known to the others as name, reachable at
	// url (its metrics listener).
	Announce(name, url string)
	// Nodes returns the nodes that announced themselves and are alive: name
	// to URL, this one included.
	Nodes(ctx context.Context) (map[string]string, error)
	// Presence says this node now has count connections of user ("" for
	// none given) in room; the other nodes learn it through
	// Handler.RemotePresence, and forget it when this node dies. The rooms
	// call it under the room's lock, so that a user's counts come in the
	// order they were made: it must only record and queue, never block
	// or call the Handler.
	Presence(room, user string, count int)
	// Occupancy returns the connections of each user ("" for the
	// anonymous ones) in every room with members on a live node, or in
	// room alone when it is not "".
	Occupancy(ctx context.Context, room string) (map[string]map[string]int, error)
	// Disconnect asks every node, this one included, to close the
	// connections that d names, through Handler.Disconnect.
	Disconnect(ctx context.Context, d Disconnect) error
}

// Handler is the node side of a broker: its rooms. The broker calls it from
// its own goroutines. *room.Hub implements it.
//
// It is four seams, one per concern, so that a broker (or a part of one)
// names what it needs: every broker delivers (DeliveryHandler) and closes
// connections on request (ControlHandler); a cluster's broker also follows
// presence across nodes (PresenceHandler); and one that lets a node order
// the rooms whose members are all its own hands them over
// (OwnershipHandler). Memory uses DeliveryHandler alone, and LocalHandler.
// Ownership itself (which rooms, from which seq, until when) is the
// broker's: the rooms hold none of it.
type Handler interface {
	DeliveryHandler
	OwnershipHandler
	PresenceHandler
	ControlHandler
}

// Delivered is a message the broker ordered, for DeliverMany.
type Delivered struct {
	Room    string
	Seq     uint64
	Payload []byte
}

// DeliveryHandler loads the node's rooms and brings them the messages the
// broker ordered: what any broker needs. The broker calls it for a room in
// the room's seq order.
type DeliveryHandler interface {
	// Loaded finishes loading a room: epoch names its stream (a new stream,
	// whose seqs start again, has a new epoch), seq is its latest seq and
	// tail its latest messages in seq order.
	Loaded(room, epoch string, seq uint64, tail []Entry)
	// DeliverMany brings messages the broker ordered to this node's
	// members, each in turn (each room's in seq order, none after a gap):
	// the handler may wake its event loops once for the whole batch.
	// Messages at or below their room's seq are duplicates and dropped.
	DeliverMany(msgs []Delivered)
	// Position returns the room's epoch and latest seq on this node, and
	// whether the room is here and loaded ("" and 0 when not here).
	Position(room string) (epoch string, seq uint64, loaded bool)
	// Settled answers a publish that was on its way when Publish returned
	// (sent on to the room's owner): seq is the seq the owner gave it (err
	// nil), or 0 and why it has none: ErrOverloaded when the owner refused
	// it, past its capacity (nothing of it was ordered), ErrUnavailable when
	// it was given up (the owner did not answer in time: stopped, or cut
	// off from Redis; or the node stopped first). A message given up was not
	// delivered under a seq of this node's own; the owner may still have
	// ordered it, in which case it arrives from the owner too. The handler
	// tells p.ID's publisher, which must not be left to believe a message
	// refused or given up was delivered.
	Settled(p Publication, seq uint64, err error)
}

// OwnershipHandler is how a cluster orders a room: the room's owner node
// orders it here, under the room's own lock (which also gives its members
// their one order), while the broker holds the room and its lease lives
// (docs/architecture.md, "The node-local fast path"). Who owns a room, from
// which seq, and until when are the broker's alone: the rooms are told
// only what to order (from), never whether they are owned.
type OwnershipHandler interface {
	// PublishOwned orders and delivers a message of a room this node owns
	// (a cluster's node-local fast path), handing it to keep to store in
	// seq order under the room's order, and returns its seq; false when
	// the room is not here, not loaded, or its seq has not reached from
	// yet (the seqs handed out before this node owned it are still on
	// their way). The broker calls it only for a room it holds, under a
	// live lease; while a publish of the room is on its way to another
	// node's order it must not call it for the room: a later message of
	// the same sender would overtake it.
	PublishOwned(p Publication, from uint64, keep func(room string, e Entry)) (uint64, bool)
	// Drop frees the room at once and ends this node's stream of it: its
	// stream here can no longer be followed, or the node stops and
	// hands it on. Members rejoin a room loaded anew. A keep not nil gets,
	// under the room's order, its epoch, latest seq and the history it
	// held (a follower writes what a gone owner may not have:
	// fillFollowed; a stopping owner hands its last seq on: handOver).
	// A room that was there is unsubscribed by the handler (Unsubscribe,
	// before Drop returns), in order with the Subscribe of a room made
	// anew by a member rejoining at once; the broker must not unsubscribe
	// it again, lest it let go of that new room.
	Drop(room string, keep func(epoch string, seq uint64, tail []Entry)) bool
	// Follow hands another node that starts to follow an owned room what
	// it loads the room from (epoch, latest seq, history) through add,
	// which runs under the room's order, so that every later message
	// reaches it through keep; false, as PublishOwned, when the room does
	// not order here now. The broker calls it only for a room it holds.
	Follow(room string, from uint64, add func(epoch string, seq uint64, tail []Entry)) (epoch string, seq uint64, tail []Entry, ok bool)
	// LeaseRenewed says that the broker's lease lives again after it
	// lapsed, the rooms it lost meanwhile dropped: joiners that JoinGate
	// held back try again.
	LeaseRenewed()
}

// JoinGate is what a broker whose rooms have owners may tell the rooms of
// joins (the Redis broker does; Memory, whose node owns every room for
// good, does not): while the node's lease has lapsed (it was stopped, or
// cut off), a room it holds may have been taken over by another node, and
// its joiners wait until the broker has checked (OwnershipHandler.
// LeaseRenewed) or dropped the room.
type JoinGate interface {
	// JoinsWait reports whether joiners of room must wait now. The rooms
	// call it under a room's lock: it takes no lock.
	JoinsWait(room string) bool
}

// PresenceHandler learns who is in the node's rooms on the other nodes of a
// cluster.
type PresenceHandler interface {
	// RemotePresence records that another node has count connections of
	// user in room (0: none).
	RemotePresence(room, node, user string, count int)
	// NodeGone forgets what a dead node reported in every room and returns,
	// per room, the users it had there.
	NodeGone(node string) map[string][]string
}

// ControlHandler carries out on this node what was asked of every node.
type ControlHandler interface {
	// Disconnect closes the connections on this node that d names.
	Disconnect(d Disconnect)
}

// Publication is a message on its way to its room, before it has a seq:
// its JSON is Prefix + seq + Suffix (see protocol.AppendChatDraft).
type Publication struct {
	Room           string
	Prefix, Suffix []byte
	// Received is when the message was read (unix nanoseconds), for the
	// processing time of a message delivered on the node that read it.
	Received int64
	// From is the event loop publishing on its own goroutine, or -1: a
	// local delivery to that loop need not wake it.
	From int
	// ID is the publisher's number for this publish, handed back with it
	// to Handler.Settled when its answer comes after Publish returned; 0:
	// nobody waits for it. The broker does not read it.
	ID uint64
}

// NewEpoch returns a new stream epoch: 12 random base-32 characters.
func NewEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:12]
}

// Entry is a message as a broker holds it: its seq and its JSON.
type Entry struct {
	Seq     uint64
	Payload []byte
}

// Stats counts a broker's traffic.
type Stats struct {
	Up bool // the broker reaches the other nodes
	// InStep: the broker reaches every node and its rooms are in step with
	// the cluster: false while a cluster's broker is cut off (owned rooms
	// go on, shared ones refuse) and until it has checked every room after.
	// The node is ready (/readyz) only while it is.
	InStep      bool
	Published   uint64 // messages sent on to their room's owner on another node, and answered
	Received    uint64 // messages of followed rooms received from their owners
	Errors      uint64 // failed broker operations
	Local       uint64 // messages of owned rooms published while the broker was unreachable
	Refused     uint64 // publishes refused or given up because the broker was unreachable
	Overloaded  uint64 // publishes refused because those before them waited past the broker's bound (ErrOverloaded)
	Diverged    uint64 // rooms whose stream Redis no longer had after an outage: members told to resume
	Gaps        uint64 // messages fetched from history because the channel missed them
	Unrecovered uint64 // seqs skipped because the broker no longer had them
	Rooms       int64  // rooms subscribed
	Reconnects  uint64
	// Owned rooms are ordered on this node; OwnedPublished counts their
	// messages, Releases the rooms it gave up (handed to a follower, or
	// freed), Ceded those of them it handed to a follower while its own
	// members stayed (redis_balance.go), Takeovers the rooms this node took
	// from an owner that did not answer, Dropped the rooms another node took
	// from this one.
	Owned          int64
	OwnedPublished uint64
	Releases       uint64
	Ceded          uint64
	Takeovers      uint64
	Dropped        uint64
	LastError      string
	// Transit: how long the rounds other nodes sent this node took to
	// arrive, from the sender's round to this node's read (redis_transit.go).
	Transit histogram.Snapshot
}
