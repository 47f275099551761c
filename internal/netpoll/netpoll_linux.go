//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Poller waits for readiness of many file descriptors at once.
//
// It never blocks its goroutine's thread in epoll_wait: it asks with a zero
// timeout, and when nothing is ready it parks the goroutine in Go's own
// poller until its epoll descriptor is readable (an epoll descriptor is,
// while any of its descriptors is ready). A thread blocked in a system call
// holds its P; Go's sysmon takes such a P back after 20 µs, wakes another
// thread for it, and keeps polling every 20 µs while any P sits in a system
// call: with a few loops idle between messages, that cost a node a quarter
// of its CPU samples in context switches (docs/benchmarks-log.md).
//
// Wake needs no system call either: the waker and the waiting goroutine are
// in one process, so Wake sets a flag and moves the parked goroutine's read
// deadline into the past, which Go's runtime turns into a wake-up of that
// goroutine alone. An eventfd written to wake a loop cost an event loop a
// write, a read, an epoll_wait more and often a thread's wake-up per wake;
// a cluster node wakes its loop once per batch from Redis.
type Poller struct {
	epfd  int
	ep    *os.File        // epfd as Go's poller knows it: its owner, closed by Close
	rc    syscall.RawConn // parks the goroutine until epfd is readable
	woken atomic.Bool     // a wake-up is pending: further Wake calls need nothing
	raw   []unix.EpollEvent
	ready []Event
	n     int                   // events of the last epoll_wait
	werr  error                 // its error
	poll  func(fd uintptr) bool // pollNow as a func value, made once: a method value made per park would allocate
}

// New creates a Poller that reports at most batch events per Wait.
func New(batch int) (*Poller, error) {
	if batch <= 0 {
		batch = 256
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("netpoll: epoll_create: %w", err)
	}
	// Non-blocking, so that os.NewFile hands it to Go's poller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("netpoll: epoll descriptor non-blocking: %w", err)
	}
	p := &Poller{epfd: epfd, ep: os.NewFile(uintptr(epfd), "epoll"), raw: make([]unix.EpollEvent, batch), ready: make([]Event, 0, batch)}
	p.poll = p.pollNow
	rc, err := p.ep.SyscallConn()
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("netpoll: epoll descriptor in Go's poller: %w", err)
	}
	p.rc = rc
	return p, nil
}

func toEpoll(events uint32) uint32 {
	var e uint32 = unix.EPOLLRDHUP
	if events&Readable != 0 {
		e |= unix.EPOLLIN
	}
	if events&Writable != 0 {
		e |= unix.EPOLLOUT
	}
	return e
}

// Add registers fd (level-triggered) for the given events.
func (p *Poller) Add(fd int, events uint32) error {
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: toEpoll(events), Fd: int32(fd)}); err != nil {
		return fmt.Errorf("netpoll: add fd %d: %w", fd, err)
	}
	return nil
}

// AddListener registers a listening socket for readability (a connection
// to accept), level-triggered and exclusive: when several pollers watch the
// same socket, a new connection wakes one of them, or a few, not all
// (EPOLLEXCLUSIVE, Linux 4.5). Such a registration cannot be modified, only
// removed with Del.
func (p *Poller) AddListener(fd int) error {
	// EPOLLEXCLUSIVE allows only EPOLLIN, EPOLLOUT, EPOLLWAKEUP and
	// EPOLLET beside it: no EPOLLRDHUP (epoll_ctl(2)).
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLEXCLUSIVE, Fd: int32(fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("netpoll: add listener fd %d: %w", fd, err)
	}
	return nil
}

// Mod changes the events fd is registered for.
func (p *Poller) Mod(fd int, events uint32) error {
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: toEpoll(events), Fd: int32(fd)}); err != nil {
		return fmt.Errorf("netpoll: modify fd %d: %w", fd, err)
	}
	return nil
}

// Del unregisters fd. Closing fd unregisters it too.
func (p *Poller) Del(fd int) error {
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("netpoll: remove fd %d: %w", fd, err)
	}
	return nil
}

// Wake makes the current or next Wait return with woken set. It is cheap
// when a wake-up is already pending.
//
// The flag is set before the deadline moves: a Wait that has not seen the
// flag yet (pollNow looks at it after park set its own deadline) is parked
// or about to park, and the past deadline, set after its own, wakes it or
// stops it from parking. Go's poller serializes the two deadline changes.
func (p *Poller) Wake() error {
	if !p.woken.CompareAndSwap(false, true) {
		return nil
	}
	if err := p.ep.SetReadDeadline(past); err != nil {
		return fmt.Errorf("netpoll: wake: %w", err)
	}
	return nil
}

// past is a deadline long gone: set on the epoll descriptor, it wakes the
// goroutine parked on it.
var past = time.Unix(1, 0)

// Wait blocks until a registered descriptor is ready, Wake is called, or
// timeoutMs milliseconds pass (-1: no limit, 0: do not block). The returned
// slice is valid until the next call. When woken is true, the caller must
// look at whatever it was woken for after Wait returns: wake-ups that arrive
// from then on wake the next Wait.
func (p *Poller) Wait(timeoutMs int) (ready []Event, woken bool, err error) {
	if !p.pollNow(0) && timeoutMs != 0 {
		if err := p.park(timeoutMs); err != nil {
			return nil, false, err
		}
	}
	if p.werr != nil {
		return nil, false, fmt.Errorf("netpoll: epoll_wait: %w", p.werr)
	}
	return p.decode(p.raw[:p.n]), p.woken.Swap(false), nil
}

// pollNow takes what is ready without blocking (a raw system call: it never
// waits, so the scheduler need not know) and reports whether there was
// anything, a wake-up or an error. It is the function Go's poller calls
// back while the goroutine waits: false parks it until epfd is readable or
// Wake moves the deadline.
func (p *Poller) pollNow(uintptr) bool {
	for {
		r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(p.epfd), uintptr(unsafePointer(p.raw)), uintptr(len(p.raw)), 0, 0, 0)
		switch errno {
		case 0:
			p.n, p.werr = int(r), nil
			return p.n > 0 || p.woken.Load()
		case unix.EINTR:
			continue
		default:
			p.n, p.werr = 0, errno
			return true
		}
	}
}

// park waits in Go's poller until pollNow finds something, or timeoutMs
// passes (-1: no limit).
func (p *Poller) park(timeoutMs int) error {
	var deadline time.Time
	if timeoutMs > 0 {
		deadline = time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	}
	if err := p.ep.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("netpoll: deadline: %w", err)
	}
	err := p.rc.Read(p.poll)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The timeout, or Wake: look once more, as a wake-up may come
		// with sockets ready.
		p.pollNow(0)
		return nil
	}
	if err != nil {
		return fmt.Errorf("netpoll: wait for epoll: %w", err)
	}
	return nil
}

// decode turns raw epoll events into Events.
func (p *Poller) decode(raw []unix.EpollEvent) []Event {
	p.ready = p.ready[:0]
	for _, ev := range raw {
		fd := int(ev.Fd)
		var e uint32
		if ev.Events&(unix.EPOLLIN|unix.EPOLLPRI) != 0 {
			e |= Readable
		}
		if ev.Events&unix.EPOLLOUT != 0 {
			e |= Writable
		}
		if ev.Events&(unix.EPOLLHUP|unix.EPOLLRDHUP|unix.EPOLLERR) != 0 {
			e |= Hangup
		}
		p.ready = append(p.ready, Event{FD: fd, Events: e})
	}
	return p.ready
}

// Close releases the poller. Registered descriptors stay open.
func (p *Poller) Close() error { return p.ep.Close() }

// unsafePointer is the address of the first event, for the raw system call.
func unsafePointer(evs []unix.EpollEvent) unsafe.Pointer { return unsafe.Pointer(&evs[0]) }
