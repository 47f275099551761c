//go:build linux

package server

import (
	"net/netip"
	"sync"
	"time"
)

// ipLimiter counts the open connections (WebSocket and HTTP) and the
// upgrade attempts of each source address. It is on the accept and upgrade
// paths only, never on the message path.
type ipLimiter struct {
	maxConns int     // 0: no limit
	rate     float64 // attempts per second; 0: no limit
	burst    float64

	mu sync.Mutex
	m  map[netip.Addr]*ipState
}

type ipState struct {
	conns  int
	tokens float64
	last   time.Time
}

func newIPLimiter(maxConns int, rate float64) *ipLimiter {
	if maxConns == 0 && rate == 0 {
		return nil
	}
	return &ipLimiter{maxConns: maxConns, rate: rate, burst: max(2*rate, 1), m: make(map[netip.Addr]*ipState)}
}

// attempt counts an upgrade attempt from ip against its rate, for a
// connection already counted (hold).
func (l *ipLimiter) attempt(ip netip.Addr, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attemptLocked(l.stateLocked(ip, now), now)
}

// hold counts one more open connection from ip, whatever the cap, and
// returns how many ip holds now: an HTTP connection is counted from its
// accept, and its requests are refused while its address is over the cap.
func (l *ipLimiter) hold(ip netip.Addr, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stateLocked(ip, now)
	st.conns++
	return st.conns
}

// over reports whether ip holds more open connections than the cap.
func (l *ipLimiter) over(ip netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.m[ip]
	return l.maxConns > 0 && st != nil && st.conns > l.maxConns
}

func (l *ipLimiter) stateLocked(ip netip.Addr, now time.Time) *ipState {
	st := l.m[ip]
	if st == nil {
		st = &ipState{tokens: l.burst, last: now}
		l.m[ip] = st
	}
	return st
}

func (l *ipLimiter) attemptLocked(st *ipState, now time.Time) bool {
	if l.rate == 0 {
		return true
	}
	st.tokens = min(st.tokens+now.Sub(st.last).Seconds()*l.rate, l.burst)
	st.last = now
	if st.tokens < 1 {
		return false
	}
	st.tokens--
	return true
}

// release counts a connection from ip as closed.
func (l *ipLimiter) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.m[ip]; st != nil && st.conns > 0 {
		st.conns--
	}
}

// sweep forgets addresses with no connection whose attempt budget is full
// again, so the map holds only active addresses.
func (l *ipLimiter) sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ip, st := range l.m {
		if st.conns == 0 && (l.rate == 0 || st.tokens+now.Sub(st.last).Seconds()*l.rate >= l.burst) {
			delete(l.m, ip)
		}
	}
}
