package broker

import (
	"time"

	"github.com/scalechat/scalechat/internal/histogram"
)

// transit measures how long the rounds other nodes send this node take to
// arrive: from the moment the sending node made its round (the T record
// that opens each payload, redis_followwire.go) to the moment this node
// reads the payload. It is Redis's queue, its write to this node's
// subscription, and what waits in that socket while the goroutine that
// reads it delivers the payloads before: the part of a cross-node
// message's way no bound of the sender sees (--redis-max-wait bounds what
// waits to be sent). Both clocks are the nodes' own: across machines the
// figures carry their offset (NTP keeps it to about a millisecond).
type transit struct{ h *histogram.Histogram }

func newTransit() transit { return transit{histogram.New(transitBounds...)} }

// transitBounds are the histogram's upper bounds: a round is usually under
// a millisecond on one machine, and past a cluster's capacity seconds.
var transitBounds = []time.Duration{
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond,
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second,
}

// observe counts a payload made at sent (unix nanoseconds) and read at
// now. A sender's clock ahead of this node's counts as no time.
func (t transit) observe(sent, now int64) { t.h.Observe(time.Duration(max(0, now-sent))) }

// read returns the histogram as Stats reports it.
func (t transit) read() histogram.Snapshot { return t.h.Snapshot() }
