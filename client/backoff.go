package client

import (
	"math"
	"time"
)

// Backoff says how long to wait before each reconnect attempt: Initial, then
// Multiplier times longer at each failed attempt, never more than Max, each
// delay shortened at random by up to Jitter of itself so that clients cut off
// together do not come back together.
type Backoff struct {
	Initial    time.Duration // default 250ms
	Max        time.Duration // default 10s
	Multiplier float64       // default 2
	Jitter     float64       // up to 1; default (0) 0.5; negative: no jitter
}

// DefaultBackoff is the Backoff used for zero fields.
var DefaultBackoff = Backoff{Initial: 250 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.5}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max <= 0 {
		b.Max = max(DefaultBackoff.Max, b.Initial)
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier < 1 {
		b.Multiplier = DefaultBackoff.Multiplier
	}
	switch {
	case b.Jitter == 0:
		b.Jitter = DefaultBackoff.Jitter
	case b.Jitter < 0:
		b.Jitter = 0
	case b.Jitter > 1:
		b.Jitter = 1
	}
	return b
}

// Delay returns the wait before attempt (counted from 1), given r, a random
// number in [0, 1). Zero fields take their defaults.
func (b Backoff) Delay(attempt int, r float64) time.Duration {
	b = b.withDefaults()
	if attempt < 1 {
		attempt = 1
	}
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(attempt-1))
	d = min(d, float64(b.Max))
	d -= d * b.Jitter * r
	return time.Duration(d)
}
