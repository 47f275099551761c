//go:build linux

package server

import (
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
	"github.com/scalechat/scalechat/internal/webhook"
)

// TestWebhooksClusterOnNATS runs two `scalechat serve` processes on a
// nats-server with JetStream, with webhooks to a real HTTP receiver started
// here: connections come and go on both nodes, one node is SIGKILLed (its
// connections end with it and, once its lease ends, leave the webhooks'
// state; when it was the dispatcher, the other takes over from the
// cursor). After deduplication by ID the receiver never sees a transition
// twice in a row, believes what is true at every step, and took each
// event once.
func TestWebhooksClusterOnNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and waits for a node's lease to end")
	}
	url := testsupport.StartNATS(t)
	bin, err := testsupport.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rcv := webhook.NewReceiver([]byte(testWebhookSecret))
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	flags := []string{"--nats", url, "--webhook-url", hook.URL, "--webhook-secret", testWebhookSecret}
	a := testsupport.StartNode(t, bin, "a", flags...)
	b := testsupport.StartNode(t, bin, "b", flags...)

	annA := joinWS(t, a.URL("/ws/r1?name=ann"))
	annB := joinWS(t, b.URL("/ws/r1?name=ann"))
	joinWS(t, b.URL("/ws/r1?name=bob"))
	joinWS(t, b.URL("/ws/r2?name=cat"))
	anon := joinWS(t, a.URL("/ws/r3"))
	waitView(t, rcv, webhook.View{Rooms: []string{"r1", "r2", "r3"}, Users: []string{"ann", "bob", "cat"},
		Members: map[string][]string{"r1": {"ann", "bob"}, "r2": {"cat"}}}, 20*time.Second)

	annB.Close() // ann still has a connection to r1, on a: nothing changes
	dan := joinWS(t, a.URL("/ws/r2?name=dan"))
	waitView(t, rcv, webhook.View{Rooms: []string{"r1", "r2", "r3"}, Users: []string{"ann", "bob", "cat", "dan"},
		Members: map[string][]string{"r1": {"ann", "bob"}, "r2": {"cat", "dan"}}}, 10*time.Second)

	b.Kill() // bob and cat were only on b
	waitView(t, rcv, webhook.View{Rooms: []string{"r1", "r2", "r3"}, Users: []string{"ann", "dan"},
		Members: map[string][]string{"r1": {"ann"}, "r2": {"dan"}}}, 30*time.Second)

	annA.Close()
	dan.Close()
	anon.Close()
	waitView(t, rcv, webhook.View{}, 15*time.Second)

	st := rcv.Stats()
	if len(st.Violations) > 0 || st.BadSignatures > 0 {
		t.Errorf("violations %q, bad signatures %d", st.Violations, st.BadSignatures)
	}
	got := map[string]int{}
	for _, e := range rcv.Events() {
		s := e.Name
		for _, f := range []string{e.Room, e.User} {
			if f != "" {
				s += " " + f
			}
		}
		got[s]++
	}
	want := map[string]int{"reset": 1}
	for _, s := range []string{"r1", "r2", "r3"} {
		want["room_occupied "+s], want["room_vacated "+s] = 1, 1
	}
	for _, s := range []string{"ann", "bob", "cat", "dan"} {
		want["user_online "+s], want["user_offline "+s] = 1, 1
	}
	for _, s := range []string{"r1 ann", "r1 bob", "r2 cat", "r2 dan"} {
		want["member_joined "+s], want["member_left "+s] = 1, 1
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events (each once)\n got %v\nwant %v\nin order: %s", got, want, strings.Join(webhookNames(rcv.Events()), ", "))
	}
	t.Logf("receiver: %d requests, %d events, %d duplicates dropped", st.Requests, st.Events, st.Duplicates)
}
