//go:build linux

package server

import (
	"errors"

	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/protocol"
)

// refusedMessage is what a sender is told when the broker gave its message
// up after accepting it (broker.Handler.Settled with seq 0): the outcome is
// unknown, so the client knows the message may still arrive.
const refusedMessage = "the cluster's message store became unreachable before it answered: " +
	"the message may not reach the room (if it was ordered, it arrives)"

// A publish's ID (broker.Publication.ID) says who waits for its late
// answer: an HTTP request (waiterBit set: a number of Server.waiters), or
// a connection, named by its loop, its descriptor and the low bits of its
// number on this node. Those bits tell it from a later connection on the
// same descriptor: one would have to be accepted 2^24 times over while a
// forward is out (at most forwardTimeout, seconds) to be taken for it.
const (
	waiterBit  = 1 << 63
	idLoopAt   = 48 // 15 bits of loop
	idFDAt     = 24 // 24 bits of descriptor
	idLowMask  = 1<<24 - 1
	idLoopMask = 1<<15 - 1
)

// publishID is the ID of c's publishes.
func (c *conn) publishID() uint64 {
	return uint64(c.loop.id)<<idLoopAt | uint64(c.fd)&idLowMask<<idFDAt | c.id&idLowMask
}

// settled hands a publish's late answer to whoever waits for it; it is
// called on the broker's goroutines (room.Config.Settled). A connection is
// told only of a message given up: one ordered reaches it as every member's.
func (s *Server) settled(p broker.Publication, seq uint64, err error) {
	if p.ID&waiterBit != 0 {
		s.waiters.settle(p.ID, answer{seq, err})
		return
	}
	if seq == 0 {
		s.refusedPublish(p, err)
	}
}

// refusedPublish hands a refusal from the broker to the loop of the sending
// connection.
func (s *Server) refusedPublish(p broker.Publication, err error) {
	n := int(p.ID >> idLoopAt & idLoopMask)
	if n >= len(s.loops) {
		return
	}
	draft := make([]byte, 0, len(p.Prefix)+1+len(p.Suffix))
	draft = append(append(append(draft, p.Prefix...), '0'), p.Suffix...)
	s.stopMu.RLock()
	defer s.stopMu.RUnlock()
	if !s.stopped {
		reason := refusedMessage
		if errors.Is(err, broker.ErrOverloaded) {
			reason = err.Error() // refused: nothing of it was ordered
		}
		s.loops[n].command(command{kind: cmdRefused, id: p.ID, pending: draft, reason: reason})
	}
}

// refused tells the connection whose publish ID is id, on its loop, that
// its message (the chat frame draft, with any seq) was refused or given up:
// an error frame unavailable naming the message's id and room, with reason,
// as every other refusal, or a close for a five-field client. A connection closed
// meanwhile is told nothing.
func (l *loop) refused(id uint64, draft []byte, reason string) {
	fd := int(id >> idFDAt & idLowMask)
	if fd >= len(l.conns) {
		return
	}
	c := l.conns[fd]
	if c == nil || c.id&idLowMask != id&idLowMask || c.state != stateOpen {
		return
	}
	var f protocol.Frame
	if protocol.ParseFrame(draft, &f) != nil {
		f = protocol.Frame{} // the server's own frame always parses; name nothing rather than something wrong
	}
	l.stats.dropped[DropUnavailable].Add(1)
	c.sendError(protocol.CodeUnavailable, reason, &f)
}
