//go:build linux

package server

import (
	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/protocol"
)

// refusedMessage is what a sender is told when the broker gave its message
// up after accepting it (broker.Handler.Refused): the outcome is unknown,
// so the client knows the message may still arrive.
const refusedMessage = "the cluster's message store became unreachable before it answered: " +
	"the message may not reach the room (if it was ordered, it arrives)"

// refusedPublish hands a refusal from the broker to the loop of the sending
// connection; it is called on the broker's goroutines (room.Config.Refused).
func (s *Server) refusedPublish(p broker.Publication) {
	c, ok := p.Sender.(*conn)
	if !ok {
		return
	}
	draft := make([]byte, 0, len(p.Prefix)+1+len(p.Suffix))
	draft = append(append(append(draft, p.Prefix...), '0'), p.Suffix...)
	s.stopMu.RLock()
	defer s.stopMu.RUnlock()
	if !s.stopped {
		c.loop.command(command{kind: cmdRefused, conn: c, pending: draft})
	}
}

// refused tells c, on its loop, that its message (the chat frame draft,
// with any seq) was given up: an error frame unavailable naming the
// message's id and room, as every other refusal, or a close for a
// five-field client. A connection closed meanwhile is told nothing.
func (l *loop) refused(c *conn, draft []byte) {
	if c.state != stateOpen {
		return
	}
	var f protocol.Frame
	if protocol.ParseFrame(draft, &f) != nil {
		f = protocol.Frame{} // the server's own frame always parses; name nothing rather than something wrong
	}
	l.stats.dropped[DropUnavailable].Add(1)
	c.sendError(protocol.CodeUnavailable, refusedMessage, &f)
}
