package hooks

import (
	"sync"
	"time"
)

// breaker is a hook's circuit breaker. Closed, every call goes through;
// after threshold failures in a row it opens for cooldown, and calls fail
// at once without reaching the backend; then one trial call goes through
// (half open): its success closes the circuit, its failure opens it for
// another cooldown. Calls made while the trial runs fail at once too.
type breaker struct {
	threshold int
	cooldown  time.Duration

	mu        sync.Mutex
	failures  int       // in a row
	openUntil time.Time // zero: closed
	trial     bool      // the half-open trial is in flight
}

// allow reports whether a call may go to the backend now.
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.openUntil.IsZero():
		return true
	case now.Before(b.openUntil) || b.trial:
		return false
	}
	b.trial = true
	return true
}

// done records a call's result.
func (b *breaker) done(ok bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.failures, b.openUntil, b.trial = 0, time.Time{}, false
		return
	}
	b.failures++
	if b.trial || b.failures >= b.threshold {
		b.openUntil, b.trial = now.Add(b.cooldown), false
	}
}
