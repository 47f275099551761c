package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/testsupport"
)

func TestIsTimeout(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("read a room's holder: %w", context.DeadlineExceeded), true},
		{redis.ErrPoolTimeout, true},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, true},
		{errors.New("read tcp: connection reset by peer"), false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{redis.ErrClosed, false},
	} {
		if got := isTimeout(c.err); got != c.want {
			t.Errorf("isTimeout(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// A call that timed out while Redis answers (the node's own pool behind
// its rounds) does not take Redis for down; a refused or dropped
// connection does.
func TestRedisTimeoutWhileRedisAnswersIsNotAnOutage(t *testing.T) {
	rs := testsupport.StartRedis(t)
	n := startNodeConfig(t, Config{URL: rs.URL(), History: 10, TTL: time.Hour})
	n.join(t, "r") // Run has found Redis up
	n.b.fail("read a room's holder", fmt.Errorf("get: %w", context.DeadlineExceeded))
	if !n.b.health.up.Load() {
		t.Fatal("a timeout while Redis answers took Redis for down")
	}
	n.b.fail("store", errors.New("read tcp: connection reset by peer"))
	if n.b.health.up.Load() {
		t.Fatal("a dropped connection did not take Redis for down")
	}
}
