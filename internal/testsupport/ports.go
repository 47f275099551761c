package testsupport

import (
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/launch"
)

// FreeAddr returns a 127.0.0.1 address with a port nobody listens on right
// now, for a process that must be told its address before it starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := launch.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Eventually polls cond every 10 ms until it holds, and fails the test
// after timeout. Only for conditions that send no signal (another process's
// state, a server's counters): where a channel or an event exists, wait on
// it instead.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out after %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
