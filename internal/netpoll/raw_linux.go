//go:build linux

package netpoll

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read reads from a non-blocking descriptor with a raw system call. A read
// of a non-blocking socket never waits, so the scheduler need not know of
// it: unix.Read's entersyscall wakes Go's sysmon whenever it sleeps (every
// message an idle loop reads, then 50 polls 20 µs apart), where a raw call
// leaves it asleep. Errors are unix.Errno (EAGAIN when nothing is there);
// n is 0 with an error and at end of file.
func Read(fd int, p []byte) (n int, err error) { return rawIO(unix.SYS_READ, fd, p) }

// Write writes to a non-blocking descriptor with a raw system call, for the
// same reason as Read.
func Write(fd int, p []byte) (n int, err error) { return rawIO(unix.SYS_WRITE, fd, p) }

// rawIO is read(2) or write(2) (trap) of p on fd as a raw system call.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	r, _, errno := unix.RawSyscall(trap, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
