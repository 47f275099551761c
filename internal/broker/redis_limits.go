package broker

import "time"

// The Redis broker's tunables (Config.Linger, HistoryLinger, FollowedLinger,
// MaxWait):
// their defaults, which serve's flags take, and their bounds.

// DefaultHistoryLinger is how long the writes of owned rooms wait to go
// out with others (Config.HistoryLinger): what a node that dies loses at
// most from Redis's history, whose members are told (reset). It is short
// because a message to a room whose other members are away (a direct
// message to someone offline) is nowhere else. A room's writes of one
// linger share a script call and a stream entry (persist.lua), so a longer
// linger stores a room of a few messages a second with one XADD a second
// instead of one a message; the other nodes never wait for the writes
// (docs/cluster.md#history-written-behind---history-linger).
const DefaultHistoryLinger = 5 * time.Millisecond

// DefaultFollowedLinger is how long the writes of owned rooms that other
// nodes follow may wait (Config.FollowedLinger): a follower holds every
// message too, and writes what Redis lacks when the owner goes first
// (redis_fill.go), so history is lost only if the owner and all its
// followers go within it. At a few messages a second a room, a second
// makes a room's writes one stream entry and one script call's share a
// second instead of one a message: Redis's largest cost for small shared
// rooms (docs/cluster.md).
const DefaultFollowedLinger = time.Second

// maxHeldWrites bounds the writes of owned rooms held for the history
// linger: past it they go out at the next round, so that a busy node
// neither holds much memory nor hands Redis one long burst a linger.
const maxHeldWrites = 4096

// maxRoundWrites is about how many writes of owned rooms one round carries
// (roundCut): four persist calls'. The publish loop waits for a round before
// it sends the next, so a round of a second's writes of a busy node (two
// thousand and more, many calls) held the records to other nodes queued
// behind it for as long as Redis took to run them all. One call's (128)
// was too few: a node's writes then went out a Redis round trip per 128,
// and a node of four on 16 cores fell behind and refused 10-20 % at 96k
// messages a second, which it carries with four calls a round
// (docs/cluster.md, capacity; 2026-11-27).
const maxRoundWrites = 4 * maxPersistBatch

// DefaultMaxWait is serve's --redis-max-wait (Config.MaxWait): a cluster
// past its capacity refuses rather than delivering seconds late. It is
// well above a round's usual wait (a linger and a Redis round trip), so
// that a burst is carried, and within what a chat user tolerates.
const DefaultMaxWait = 250 * time.Millisecond

// maxPendingWrites bounds the history writes of owned rooms a node has
// pending: past it, while Config.MaxWait is on, the node refuses new
// messages (Redis.behind). Rounds take about maxRoundWrites writes each and
// run back to back, so writes pile up only when Redis, or the node's round
// to it, is slower than the messages come; then the pile is memory and
// history at risk, and without the bound it grew until the node ran out
// (a room no other node follows is never refused for MaxWait). 65,536
// writes are seconds of a busy node's messages and tens of MB.
const maxPendingWrites = 1 << 16

// MaxHistoryLinger bounds Config.HistoryLinger and FollowedLinger.
const MaxHistoryLinger = time.Second

// DefaultLinger is how long a publish waits for others to go out with it
// in one round (Config.Linger): a round costs the node a goroutine wake, a
// write and a read, and Redis a read and a write to each subscribed node,
// however many messages it carries. Go's timers may make it up to about a
// millisecond on an idle node. 250 µs keeps a cross-node delivery's p50
// within 0.5 ms of a same-node one for small rooms at a message a second a
// client (0.33 ms over, against 0.50–0.54 at 500 µs), for 5–13 % more of
// Redis's CPU a delivery (docs/cluster.md, "Rounds to Redis"; 2026-11-28).
const DefaultLinger = 250 * time.Microsecond

// MaxLinger bounds Config.Linger: a publish waits no longer than a
// twentieth of a second for company.
const MaxLinger = 50 * time.Millisecond
