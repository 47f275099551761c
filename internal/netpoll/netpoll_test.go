//go:build linux

package netpoll

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// A Wait with no limit parks until Wake, from another goroutine, and one
// with a limit returns empty when it passes; neither returns early.
func TestWaitParksUntilWokenOrTimedOut(t *testing.T) {
	p := newPoller(t)
	start := time.Now()
	evs, woken, err := p.Wait(50)
	if err != nil || woken || len(evs) != 0 {
		t.Fatalf("Wait(50) = %v, %v, %v; want nothing", evs, woken, err)
	}
	if d := time.Since(start); d < 45*time.Millisecond {
		t.Fatalf("Wait(50) returned after %v", d)
	}
	done := make(chan bool)
	go func() {
		_, woken, err := p.Wait(-1)
		if err != nil {
			t.Error(err)
		}
		done <- woken
	}()
	select {
	case <-done:
		t.Fatal("Wait(-1) returned before anything happened")
	case <-time.After(20 * time.Millisecond):
	}
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("Wait(-1) returned without woken")
	}
}

// A descriptor that becomes ready while Wait is parked ends the wait, and a
// level-triggered one still ready is reported again without parking.
func TestWaitSeesReadinessWhileParked(t *testing.T) {
	lfd, addr := listenFD(t)
	p := newPoller(t)
	if err := p.AddListener(lfd); err != nil {
		t.Fatal(err)
	}
	got := make(chan []Event, 1)
	go func() {
		evs, _, err := p.Wait(5000)
		if err != nil {
			t.Error(err)
		}
		got <- append([]Event(nil), evs...)
	}()
	time.Sleep(20 * time.Millisecond) // let it park: there is no signal for that
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	evs := <-got
	if len(evs) != 1 || evs[0].FD != lfd || time.Since(start) > 2*time.Second {
		t.Fatalf("Wait returned %+v after %v; want the listener at once", evs, time.Since(start))
	}
	if evs, _, _ := p.Wait(-1); len(evs) != 1 {
		t.Fatalf("the connection still waits; Wait(-1) returned %+v", evs)
	}
}

// No wake-up is lost however it falls against a Wait (before it polls,
// while it parks, while parked, while it runs): a goroutine that counts and
// wakes 20,000 times is always seen to the last count by a waiter that
// parks without limit, or with a limit of 1 ms. A lost wake-up leaves the
// waiter parked; a watchdog then closes the poller, and the test fails
// instead of hanging.
func TestWakeIsNeverLost(t *testing.T) {
	for _, limit := range []int{-1, 1} {
		p := newPoller(t)
		const n = 20000
		var sent atomic.Int64
		var waker sync.WaitGroup
		// Waited for below: its last Wake can come after the waiter saw
		// the last count (it counts first), and once the test had ended
		// its error on the closed poller panicked the run (CI, 2026-11-27).
		waker.Go(func() {
			for range n {
				sent.Add(1)
				if err := p.Wake(); err != nil {
					t.Error(err)
					return
				}
			}
		})
		stuck := time.AfterFunc(20*time.Second, func() { p.Close() })
		var seen int64
		for seen < n {
			_, woken, err := p.Wait(limit)
			if err != nil {
				t.Fatalf("limit %d: a wake-up was lost: saw %d of %d (%v)", limit, seen, n, err)
			}
			if woken {
				seen = sent.Load()
			}
		}
		stuck.Stop()
		waker.Wait()
	}
}
