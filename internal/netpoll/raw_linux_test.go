//go:build linux

package netpoll

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// Read and Write behave as unix.Read and unix.Write on a non-blocking
// socket: the bytes, EAGAIN when there are none, 0 and no error at the end.
func TestRawReadWrite(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	buf := make([]byte, 16)
	if n, err := Read(fds[0], buf); n != 0 || !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("Read of an empty socket = %d, %v; want 0, EAGAIN", n, err)
	}
	if n, err := Write(fds[1], []byte("hello")); n != 5 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if n, err := Read(fds[0], buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %d, %v, %q", n, err, buf[:n])
	}
	unix.Close(fds[1])
	if n, err := Read(fds[0], buf); n != 0 || err != nil {
		t.Fatalf("Read at the end = %d, %v; want 0, nil", n, err)
	}
	if _, err := Write(-1, buf); !errors.Is(err, unix.EBADF) {
		t.Fatalf("Write to -1: %v, want EBADF", err)
	}
}
