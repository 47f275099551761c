//go:build linux

package server

import (
	"bytes"
	"fmt"

	"github.com/scalechat/scalechat/internal/protocol"
)

// maxHeld bounds the chat messages a five-field client may send while its
// URL's room loads; the next one is refused (close 1008). With the rate
// limiter's burst in front of it, this only stops a client that floods a
// room that takes long to load, and bounds what one connection holds to
// maxHeld messages of at most --max-message-size each.
const maxHeld = 64

// heldChat is what a loop holds for a five-field client whose URL's room is
// loading from the broker: the chat messages it sent meanwhile, published
// in their order once the room is loaded. A five-field client cannot wait
// for a joined frame it never gets, so a message sent right after
// connecting must not find it "not a member" on a cluster node.
type heldChat struct {
	room string
	msgs [][]byte // the client's messages, copied out of the read buffer
}

// holdWhileLoading starts holding c's chat messages while its URL's room
// loads: five-field clients only (a client of the subprotocol waits for its
// joined frame, and gets not_joined before it).
func (c *conn) holdWhileLoading(name string) {
	l := c.loop
	if c.control || l.held[c] != nil {
		return
	}
	l.held[c] = &heldChat{room: name}
}

// hold keeps a chat message for the URL's room if that room is loading,
// and reports whether it did (or refused it for the bound).
func (c *conn) hold(f *protocol.Frame, data []byte) bool {
	l := c.loop
	h := l.held[c]
	if h == nil || (f.Room != nil && string(f.Room) != h.room) {
		return false
	}
	if len(h.msgs) >= maxHeld {
		l.stats.dropped[DropRateLimit].Add(1)
		c.sendError(protocol.CodeRateLimited, fmt.Sprintf("more than %d messages were sent while the room loads", maxHeld), f)
		return true
	}
	h.msgs = append(h.msgs, bytes.Clone(data))
	return true
}

// releaseHeld publishes what c sent while its URL's room loaded, now that
// c is a member of it.
func (c *conn) releaseHeld() {
	l := c.loop
	h := l.held[c]
	if h == nil {
		return
	}
	delete(l.held, c)
	for _, msg := range h.msgs {
		if c.state != stateOpen || c.urlRoom == nil {
			return
		}
		f := &l.frame
		f.SenderOverride = c.sender
		if err := protocol.ParseFrame(msg, f); err != nil {
			continue // parsed once already, when it was held
		}
		if l.quiet || l.draining {
			c.sendError(protocol.CodeUnavailable, "server shutting down", f)
			return
		}
		c.publishIn(f, msg, c.urlRoom)
	}
}
