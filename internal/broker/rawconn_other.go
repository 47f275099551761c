//go:build !linux

package broker

import (
	"context"
	"net"
	"time"
)

// rawDialer is nil (go-redis's own dialer) where the server does not run:
// the broker builds on every system for the packages that import it, and
// only Linux's needs raw reads (rawconn_linux.go says why).
func rawDialer(time.Duration, bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil
}
