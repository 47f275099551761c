//go:build linux

// Package netpoll is a thin wrapper over Linux's readiness notification
// (epoll) with a wake-up from any goroutine, for event loops that serve many
// sockets from one goroutine. It builds on Linux only, and so do the server
// and the load tester built on it; another system would need a kqueue poller.
//
// A Poller is owned by one goroutine, which calls Wait; any goroutine may
// call Wake.
package netpoll

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
