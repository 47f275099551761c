package testsupport

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a target address. It can cut every
// connection it carries and refuse new ones, like a load balancer in front
// of a node that dies.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	stallUp   atomic.Bool // discard what clients send
	stallDown atomic.Bool // discard what the server sends

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	refusing bool
	accepted int
}

// NewProxy listens on a free loopback port and forwards to target. It is
// closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the WebSocket URL of path through the proxy.
func (p *Proxy) URL(path string) string { return "ws://" + p.Addr() + path }

// Accepted counts the client connections the proxy has forwarded.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.refusing {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.accepted++
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(c) })
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn, stall *atomic.Bool) {
		buf := make([]byte, 32<<10)
		for {
			// Either side being cut ends the copy, which is how every
			// proxied connection ends here: no error to report.
			n, err := src.Read(buf)
			if n > 0 && !stall.Load() {
				if _, err := dst.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// Whichever side ends, cut both: an abrupt drop, no close handshake.
		dst.Close()
		src.Close()
	}
	wg.Go(func() { pipe(up, c, &p.stallUp) })
	wg.Go(func() { pipe(c, up, &p.stallDown) })
	wg.Wait()
}

// Drop cuts every connection the proxy carries, without a WebSocket close.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Stall makes the proxy discard the bytes clients send (toServer) and the
// bytes the server sends (toClient) while set, without closing anything: a
// connection that silently loses data until it is dropped.
func (p *Proxy) Stall(toServer, toClient bool) {
	p.stallUp.Store(toServer)
	p.stallDown.Store(toClient)
}

// Refuse makes the proxy close new connections at once (refuse=true) or
// forward them again (false).
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	p.refusing = refuse
	p.mu.Unlock()
}

// Close stops the proxy, cuts its connections and waits for its goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Drop()
	p.wg.Wait()
}
