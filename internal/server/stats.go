//go:build linux

package server

import (
	"sync/atomic"
	"time"

	"github.com/scalechat/scalechat/internal/histogram"
	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/ws"
)

// DropReason says why a client's message was refused or a queued frame was
// discarded.
type DropReason int

// Drop reasons, as exposed by Stats.Dropped.
const (
	DropRateLimit DropReason = iota
	DropTooBig
	DropInvalid
	DropSlowConsumer
	DropForbidden // a join the token, its namespace (unknown, or join_token) or the node's room cap does not allow
	DropTimeout   // a frame, or the first frame, that did not arrive in time
	// DropUnavailable: a chat message to a room shared with other nodes
	// while Redis is unreachable (broker.ErrUnavailable).
	DropUnavailable
	DropBackendOnly // a client's message in a namespace where only the backend publishes
	DropRoomFull    // a join past the namespace's max_members
	// DropHook: a join or message the application's backend refused, or
	// did not answer for (a hook that fails closed), or that could not
	// wait for it.
	DropHook
	// DropOverloaded: a chat message read while its event loop was behind
	// by more than Config.MaxLoopLag (lag.go).
	DropOverloaded
	dropReasons
)

var dropReasonNames = [dropReasons]string{"rate_limit", "too_big", "invalid", "slow_consumer", "forbidden", "timeout", "unavailable",
	"backend_only", "room_full", "hook", "overloaded"}

func (r DropReason) String() string { return dropReasonNames[r] }

// RefuseReason says why a connection was refused before the upgrade.
type RefuseReason int

// Refuse reasons, as exposed by Stats.Refused.
const (
	RefuseMaxConnections RefuseReason = iota
	RefuseShuttingDown
	RefuseBadRequest
	RefuseOrigin
	RefuseInternal
	RefuseAuth        // missing, forged or expired token
	RefuseForbidden   // the token does not allow the room
	RefusePerIP       // too many open connections from one address
	RefuseConnectRate // too many upgrade attempts per second from one address
	RefuseRoomsFull   // the node holds --max-rooms rooms
	RefuseHeaderSize  // request line and headers over the server's maximum (HTTP 431)
	RefuseHandshake   // request line and headers (or the TLS handshake) not in within --handshake-timeout
	RefuseBodyTimeout // a request body not in within --http-body-timeout
	RefuseBodySize    // a request body over --max-body-bytes (HTTP 413)
	RefuseHook        // the connect hook, or the join hook of the URL's room, refused or did not answer
	refuseReasons
)

var refuseReasonNames = [refuseReasons]string{"max_connections", "shutting_down", "bad_request", "origin", "internal",
	"auth", "forbidden", "per_ip", "connect_rate", "rooms_full", "header_too_large", "handshake_timeout", "body_timeout",
	"body_too_large", "hook"}

func (r RefuseReason) String() string { return refuseReasonNames[r] }

// closeCodes are the close codes counted one by one; others count as
// "other". 1006 stands for a connection that ended without a close
// handshake (EOF, reset, timeout).
var closeCodes = [...]ws.StatusCode{1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1011, 1012, 1013, CloseDisconnected}

func closeCodeIndex(code ws.StatusCode) int {
	for i, c := range closeCodes {
		if c == code {
			return i
		}
	}
	return len(closeCodes)
}

// processingBounds are the upper bounds of the processing time histogram's
// buckets: 1, 2, 3, 5, 7 per decade from 10µs to 10s, fine enough to
// interpolate percentiles within about 20 %.
var processingBounds = []time.Duration{
	10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond, 50 * time.Microsecond, 70 * time.Microsecond,
	100 * time.Microsecond, 200 * time.Microsecond, 300 * time.Microsecond, 500 * time.Microsecond, 700 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond, 7 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond, 70 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, 700 * time.Millisecond,
	time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 7 * time.Second,
	10 * time.Second,
}

// Histogram is a snapshot of a duration histogram.
type Histogram = histogram.Snapshot

// loopStats are one loop's counters. Each loop owns its own, so counting on
// the hot path never contends across loops.
type loopStats struct {
	messagesIn  atomic.Uint64
	deliveries  atomic.Uint64
	bytesIn     atomic.Uint64
	bytesOut    atomic.Uint64
	dropped     [dropReasons]atomic.Uint64
	disconnects [len(closeCodes) + 1]atomic.Uint64
	processing  *histogram.Histogram // processingBounds
	_           [64]byte             // keep loops' counters off each other's cache lines
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	Connections    int64             // WebSocket connections open now
	HTTPConns      int64             // HTTP connections open now (not upgraded); they count against the same caps
	Accepted       uint64            // upgrades completed
	AcceptedOnLoop uint64            // of them, answered on an event loop (the rest by net/http: TLS, hand-offs)
	Refused        map[string]uint64 // by RefuseReason
	Rooms          int64             // rooms held, empty ones in their grace period included
	HistoryEntries int64             // messages held in the rooms' histories
	// HistoryBytes is what the histories cost: each message's buffer as
	// allocated and its slot in the ring (see room.Hub.HistoryBytes).
	HistoryBytes int64
	// HistoryJSONBytes is the JSON the histories hold: an entry costs
	// (HistoryBytes - HistoryJSONBytes) / HistoryEntries beyond its JSON.
	HistoryJSONBytes int64
	MessagesIn       uint64            // text messages received from clients
	Deliveries       uint64            // chat messages queued to members
	BytesIn          uint64            // WebSocket bytes read
	BytesOut         uint64            // WebSocket bytes written
	Dropped          map[string]uint64 // by DropReason
	Disconnects      map[int]uint64    // by close code; 0 for codes not listed

	// The HTTP transport.
	Polls          uint64 // GET /rooms/{room}/messages requests
	PollsWaiting   int64  // long polls waiting now
	HTTPMessagesIn uint64 // chat messages POSTed (also counted in MessagesIn)
	HTTPDeliveries uint64 // chat messages returned to polls (also counted in Deliveries)
	HTTPBytesIn    uint64 // bytes read on HTTP connections (for TLS: everything on the TLS connection)
	HTTPBytesOut   uint64

	// API counts the server API's requests by outcome: "ok" (let through
	// with the key), "unauthorized", "bad_request", and "published", the
	// messages published through it.
	API map[string]uint64
	// Hooks are the counters of each hook that is on (docs/hooks.md).
	Hooks []hooks.Stats
	// HookJobsGone counts join and publish calls not made: their
	// connection closed before a hook worker took them.
	HookJobsGone uint64

	// Processing is the message processing time: from the loop waking up
	// with a client's frame to read (in a cluster: from the broker bringing
	// the message to the node) until the end of the flush that wrote the
	// message to the last member on a loop. A message delivered on k
	// loops counts k times, once per loop, so that no delivery needs a
	// counter shared across loops. Empty when Config.ProcessingTime is off.
	Processing Histogram
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Connections:    s.conns.Load(),
		HTTPConns:      s.httpConns.Load(),
		Accepted:       s.accepted.Load(),
		AcceptedOnLoop: s.acceptedOnLoop.Load(),
		API: map[string]uint64{
			"ok": s.apiRequests[apiOK].Load(), "unauthorized": s.apiRequests[apiUnauthorized].Load(),
			"bad_request": s.apiRequests[apiBadRequest].Load(), "published": s.apiPublished.Load(),
		},
		Refused:          make(map[string]uint64, refuseReasons),
		Hooks:            s.hooks.Stats(),
		HookJobsGone:     s.hookJobsGone.Load(),
		Rooms:            s.hub.Rooms(),
		HistoryEntries:   s.hub.HistoryEntries(),
		HistoryBytes:     s.hub.HistoryBytes(),
		HistoryJSONBytes: s.hub.HistoryJSONBytes(),
		Dropped:          make(map[string]uint64, dropReasons),
		Disconnects:      make(map[int]uint64, len(closeCodes)+1),
	}
	st.Polls, st.PollsWaiting = s.polls.Load(), s.waitingPolls.Load()
	st.HTTPMessagesIn, st.HTTPDeliveries = s.httpIn.Load(), s.httpOut.Load()
	st.HTTPBytesIn, st.HTTPBytesOut = s.httpBytesIn.Load(), s.httpBytesOut.Load()
	st.MessagesIn, st.Deliveries = st.HTTPMessagesIn, st.HTTPDeliveries

	st.Processing = histogram.Empty(processingBounds...)
	for i := range s.refused {
		st.Refused[RefuseReason(i).String()] = s.refused[i].Load()
	}
	for i := range dropReasons {
		st.Dropped[DropReason(i).String()] = s.httpDropped[i].Load()
	}
	for _, l := range s.loops {
		ls := &l.stats
		st.MessagesIn += ls.messagesIn.Load()
		st.Deliveries += ls.deliveries.Load()
		st.BytesIn += ls.bytesIn.Load()
		st.BytesOut += ls.bytesOut.Load()
		for i := range ls.dropped {
			st.Dropped[DropReason(i).String()] += ls.dropped[i].Load()
		}
		for i := range ls.disconnects {
			code := 0
			if i < len(closeCodes) {
				code = int(closeCodes[i])
			}
			st.Disconnects[code] += ls.disconnects[i].Load()
		}
		ls.processing.AddTo(&st.Processing)
	}
	return st
}
