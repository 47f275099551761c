//go:build linux

package bench

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// redisLink is a node's own TCP path to redis-server, through which the
// local cluster cuts one node off from Redis while its clients stay
// connected (LocalCluster.CutNode): what a network partition between a node
// and Redis does, which no signal to a process can. It owns its listener,
// the connections it forwards and the goroutines that copy them.
type redisLink struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	cutTill time.Time // while now is before it, connections are refused
	closed  bool

	wg sync.WaitGroup
}

// newRedisLink listens on a free loopback port and forwards every connection
// to target.
func newRedisLink(target string) (*redisLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &redisLink{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	l.wg.Go(l.acceptLoop)
	return l, nil
}

// addr is where the node connects instead of Redis.
func (l *redisLink) addr() string { return l.ln.Addr().String() }

func (l *redisLink) acceptLoop() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		if !l.track(c) {
			_ = c.Close() // cut off: the node sees its connection refused at once
			continue
		}
		l.wg.Go(func() { l.forward(c) })
	}
}

// track records c unless the link is cut or closed.
func (l *redisLink) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || time.Now().Before(l.cutTill) {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *redisLink) forward(c net.Conn) {
	defer l.drop(c)
	r, err := net.DialTimeout("tcp", l.target, 2*time.Second)
	if err != nil {
		return
	}
	if !l.track(r) {
		_ = r.Close()
		return
	}
	defer l.drop(r)
	done := make(chan struct{})
	go func() { // owned here: forward waits for it below
		defer close(done)
		_, _ = io.Copy(r, c)
		_ = r.Close()
	}()
	_, _ = io.Copy(c, r)
	_ = c.Close()
	<-done
}

func (l *redisLink) drop(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	_ = c.Close()
}

// cut closes every connection and refuses new ones for d.
func (l *redisLink) cut(d time.Duration) {
	l.mu.Lock()
	l.cutTill = time.Now().Add(d)
	conns := l.conns
	l.conns = make(map[net.Conn]struct{})
	l.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// close stops the link and waits for its goroutines.
func (l *redisLink) close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	err := l.ln.Close()
	l.cut(0)
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
