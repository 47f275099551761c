//go:build linux

package server

import (
	"net/netip"
	"sync"
	"time"
)

// ipLimiter counts the open connections and the upgrade attempts of each
// source address. It is on the upgrade path only, never on the message
// path.
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

// admit counts an attempt from ip and, when allowed, an open connection.
func (l *ipLimiter) admit(ip netip.Addr, now time.Time) (RefuseReason, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.m[ip]
	if st == nil {
		st = &ipState{tokens: l.burst, last: now}
		l.m[ip] = st
	}
	if l.rate > 0 {
		st.tokens = min(st.tokens+now.Sub(st.last).Seconds()*l.rate, l.burst)
		st.last = now
		if st.tokens < 1 {
			return RefuseConnectRate, false
		}
		st.tokens--
	}
	if l.maxConns > 0 && st.conns >= l.maxConns {
		return RefusePerIP, false
	}
	st.conns++
	return 0, true
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

// size returns how many addresses are tracked.
func (l *ipLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
