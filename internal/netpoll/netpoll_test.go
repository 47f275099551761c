//go:build linux

package netpoll

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// listenFD returns a listening TCP socket on loopback, non-blocking, and its
// address.
func listenFD(t *testing.T) (int, string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}).String()
}

func newPoller(t *testing.T) *Poller {
	t.Helper()
	p, err := New(8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A listening socket registered with AddListener in two pollers is reported
// readable while a connection waits (level-triggered), to at least one of
// them, and to none once the connection is accepted.
func TestAddListener(t *testing.T) {
	lfd, addr := listenFD(t)
	ps := []*Poller{newPoller(t), newPoller(t)}
	for _, p := range ps {
		if err := p.AddListener(lfd); err != nil {
			t.Fatal(err)
		}
	}
	ready := func(timeoutMs int) int {
		n := 0
		for _, p := range ps {
			evs, _, err := p.Wait(timeoutMs)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.FD != lfd || ev.Events&Readable == 0 {
					t.Fatalf("event %+v, want the listener readable", ev)
				}
				n++
			}
			timeoutMs = 0
		}
		return n
	}
	if n := ready(0); n != 0 {
		t.Fatalf("%d pollers report a listener nobody connected to", n)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := ready(5000); n == 0 {
		t.Fatal("no poller reports the connection waiting")
	}
	if n := ready(0); n == 0 {
		t.Fatal("not level-triggered: the connection still waits, and no poller reports it")
	}
	fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if n := ready(0); n != 0 {
		t.Fatalf("%d pollers report a listener with nothing to accept", n)
	}
	// An exclusive registration cannot be modified, only removed.
	if err := ps[0].Mod(lfd, Readable); err == nil {
		t.Error("Mod of an exclusive registration succeeded")
	}
	if err := ps[0].Del(lfd); err != nil {
		t.Errorf("Del: %v", err)
	}
}
