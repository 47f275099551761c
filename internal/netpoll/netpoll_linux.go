//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Poller waits for readiness of many file descriptors at once.
type Poller struct {
	epfd   int
	wakefd int
	woken  atomic.Bool // a wake-up is pending: further Wake calls need no syscall
	raw    []unix.EpollEvent
	ready  []Event
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
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("netpoll: eventfd: %w", err)
	}
	p := &Poller{epfd: epfd, wakefd: wakefd, raw: make([]unix.EpollEvent, batch), ready: make([]Event, 0, batch)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd)}); err != nil {
		p.Close()
		return nil, fmt.Errorf("netpoll: register eventfd: %w", err)
	}
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
func (p *Poller) Wake() error {
	if !p.woken.CompareAndSwap(false, true) {
		return nil
	}
	var one = [8]byte{1}
	_, err := unix.Write(p.wakefd, one[:])
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("netpoll: wake: %w", err)
	}
	return nil
}

// Wait blocks until a registered descriptor is ready, Wake is called, or
// timeoutMs milliseconds pass (-1: no limit, 0: do not block). The returned
// slice is valid until the next call. When woken is true, the caller must
// look at whatever it was woken for after Wait returns: wake-ups that arrive
// from then on wake the next Wait.
func (p *Poller) Wait(timeoutMs int) (ready []Event, woken bool, err error) {
	var n int
	for {
		n, err = unix.EpollWait(p.epfd, p.raw, timeoutMs)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return nil, false, fmt.Errorf("netpoll: epoll_wait: %w", err)
		}
	}
	p.ready = p.ready[:0]
	for _, ev := range p.raw[:n] {
		fd := int(ev.Fd)
		if fd == p.wakefd {
			var buf [8]byte
			_, _ = unix.Read(p.wakefd, buf[:]) // EAGAIN only if already drained
			p.woken.Store(false)
			woken = true
			continue
		}
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
	return p.ready, woken, nil
}

// Close releases the poller. Registered descriptors stay open.
func (p *Poller) Close() error {
	err1 := unix.Close(p.wakefd)
	err2 := unix.Close(p.epfd)
	return errors.Join(err1, err2)
}
