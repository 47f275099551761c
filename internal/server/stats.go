//go:build linux

package server

import (
	"sync/atomic"

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
	DropForbidden // a join the token or the node's room cap does not allow
	DropTimeout   // a frame, or the first frame, that did not arrive in time
	dropReasons
)

var dropReasonNames = [dropReasons]string{"rate_limit", "too_big", "invalid", "slow_consumer", "forbidden", "timeout"}

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
	refuseReasons
)

var refuseReasonNames = [refuseReasons]string{"max_connections", "shutting_down", "bad_request", "origin", "internal",
	"auth", "forbidden", "per_ip", "connect_rate", "rooms_full"}

func (r RefuseReason) String() string { return refuseReasonNames[r] }

// closeCodes are the close codes counted one by one; others count as
// "other". 1006 stands for a connection that ended without a close
// handshake (EOF, reset, timeout).
var closeCodes = [...]ws.StatusCode{1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1011, 1013}

func closeCodeIndex(code ws.StatusCode) int {
	for i, c := range closeCodes {
		if c == code {
			return i
		}
	}
	return len(closeCodes)
}

// loopStats are one loop's counters. Each loop owns its own, so counting on
// the hot path never contends across loops.
type loopStats struct {
	messagesIn  atomic.Uint64
	deliveries  atomic.Uint64
	bytesIn     atomic.Uint64
	bytesOut    atomic.Uint64
	dropped     [dropReasons]atomic.Uint64
	disconnects [len(closeCodes) + 1]atomic.Uint64
	_           [64]byte // keep loops' counters off each other's cache lines
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	Connections    int64             // open now
	Accepted       uint64            // upgrades completed
	Refused        map[string]uint64 // by RefuseReason
	Rooms          int64             // rooms held, empty ones in their grace period included
	HistoryEntries int64
	MessagesIn     uint64            // text messages received from clients
	Deliveries     uint64            // chat messages queued to members
	BytesIn        uint64            // WebSocket bytes read
	BytesOut       uint64            // WebSocket bytes written
	Dropped        map[string]uint64 // by DropReason
	Disconnects    map[int]uint64    // by close code; 0 for codes not listed
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Connections:    s.conns.Load(),
		Accepted:       s.accepted.Load(),
		Refused:        make(map[string]uint64, refuseReasons),
		Rooms:          s.hub.Rooms(),
		HistoryEntries: s.hub.HistoryEntries(),
		Dropped:        make(map[string]uint64, dropReasons),
		Disconnects:    make(map[int]uint64, len(closeCodes)+1),
	}
	for i := range s.refused {
		st.Refused[RefuseReason(i).String()] = s.refused[i].Load()
	}
	for i := range dropReasons {
		st.Dropped[DropReason(i).String()] = 0
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
	}
	return st
}
