// Package netpoll is a thin wrapper over the operating system's readiness
// notification (epoll on Linux) with a wake-up channel, for event loops that
// serve many sockets from one goroutine.
//
// A Poller is owned by one goroutine, which calls Wait; any goroutine may
// call Wake.
package netpoll

import "errors"

// Event bits reported by Wait and accepted by Add and Mod.
const (
	Readable uint32 = 1 << iota
	Writable
	Hangup // the peer closed or the socket failed; reading reports which
)

// Event is one ready file descriptor.
type Event struct {
	FD     int
	Events uint32
}

// ErrUnsupported is returned by New on systems without an implementation.
var ErrUnsupported = errors.New("netpoll: the event loop needs Linux (epoll)")
