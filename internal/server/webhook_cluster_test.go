//go:build linux

package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
	"github.com/scalechat/scalechat/internal/webhook"
)

// waitView waits until the receiver believes want.
func waitView(t *testing.T, rcv *webhook.Receiver, want webhook.View, timeout time.Duration) {
	t.Helper()
	if !rcv.Await(want, timeout) {
		t.Fatalf("the receiver believes %+v, want %+v; events %q", rcv.View(), want, webhookNames(rcv.Events()))
	}
}

// joinWS connects to url and reads the joined frame, trying again for a
// while: a node that just saw Redis come back may refuse or close first.
func joinWS(t *testing.T, url string) *testsupport.WSConn {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := testsupport.DialWS(context.Background(), url)
		if err == nil {
			if _, _, _, err = c.Joined(5 * time.Second); err == nil {
				t.Cleanup(func() { c.Close() })
				return c
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("join %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond) // a retry's pause, as a client's
	}
}

// TestWebhooksClusterNodeKilledAndRedisRestarted runs two `scalechat
// serve` processes on a real redis-server with webhooks to a real HTTP
// receiver started here. Connections come and go on both nodes; one node is
// SIGKILLed (its connections end with it and, once its lease ends, leave
// the webhooks' state); Redis restarts empty (a reset, then what is there
// now). After deduplication by ID the receiver never sees a transition
// twice in a row, and believes what is true at every step.
func TestWebhooksClusterNodeKilledAndRedisRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and waits for a node's lease to end")
	}
	rs := testsupport.StartRedis(t)
	bin, err := testsupport.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rcv := webhook.NewReceiver([]byte(testWebhookSecret))
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	flags := []string{"--redis", rs.URL(), "--webhook-url", hook.URL, "--webhook-secret", testWebhookSecret}
	a := testsupport.StartNode(t, bin, "a", flags...)
	b := testsupport.StartNode(t, bin, "b", flags...)

	joinWS(t, a.URL("/ws/r1?name=ann"))
	annB := joinWS(t, b.URL("/ws/r1?name=ann"))
	joinWS(t, b.URL("/ws/r1?name=bob"))
	joinWS(t, b.URL("/ws/r2?name=cat"))
	anon := joinWS(t, a.URL("/ws/r3"))
	waitView(t, rcv, webhook.View{Rooms: []string{"r1", "r2", "r3"}, Users: []string{"ann", "bob", "cat"},
		Members: map[string][]string{"r1": {"ann", "bob"}, "r2": {"cat"}}}, 10*time.Second)

	annB.Close() // ann still has a connection to r1, on a: nothing changes
	joinWS(t, a.URL("/ws/r2?name=dan"))
	waitView(t, rcv, webhook.View{Rooms: []string{"r1", "r2", "r3"}, Users: []string{"ann", "bob", "cat", "dan"},
		Members: map[string][]string{"r1": {"ann", "bob"}, "r2": {"cat", "dan"}}}, 10*time.Second)

	b.Kill() // bob and cat were only on b
	waitView(t, rcv, webhook.View{Rooms: []string{"r1", "r2", "r3"}, Users: []string{"ann", "dan"},
		Members: map[string][]string{"r1": {"ann"}, "r2": {"dan"}}}, 15*time.Second)

	rs.Stop()
	rs.Restart()
	// What a backend sees: a reset, then a's state as it is once its rooms
	// are checked. Redis lost every room's stream, so a closes every
	// member with 1012 to resume (docs/cluster.md, "Redis outages"); these
	// clients do not resume: what is left is what joins after.
	waitResets(t, rcv, 2)
	// eve joins once a is in step with Redis again (ready): a room loaded
	// while a could not reach Redis is an island of a's own, dropped when
	// Redis is back (its members closed with 1012), and eve would be
	// gone again (it failed so once in a full -race run, the machine busy).
	testsupport.Eventually(t, 20*time.Second, "a ready again", func() bool {
		_, body := httpGet(t, "http://"+a.Addr+"/readyz", nil)
		return strings.HasPrefix(body, "ready")
	})
	anon.Close()
	joinWS(t, a.URL("/ws/r4?name=eve"))
	waitView(t, rcv, webhook.View{Rooms: []string{"r4"}, Users: []string{"eve"},
		Members: map[string][]string{"r4": {"eve"}}}, 20*time.Second)

	st := rcv.Stats()
	if len(st.Violations) > 0 || st.BadSignatures > 0 {
		t.Errorf("violations %q, bad signatures %d", st.Violations, st.BadSignatures)
	}
	t.Logf("receiver: %d requests, %d events, %d duplicates dropped", st.Requests, st.Events, st.Duplicates)
}

// waitResets waits until the receiver took n resets.
func waitResets(t *testing.T, rcv *webhook.Receiver, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		changed := rcv.Changed()
		got := 0
		for _, e := range rcv.Events() {
			if e.Name == webhook.Reset {
				got++
			}
		}
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%d resets, want %d; events %q", got, n, webhookNames(rcv.Events()))
		}
	}
}
