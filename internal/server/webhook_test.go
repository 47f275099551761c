//go:build linux

package server

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
	"github.com/scalechat/scalechat/internal/webhook"
)

const testWebhookSecret = "webhook-secret-of-16+"

// webhookNames returns the events' names with their room and user, the
// opening reset left out.
func webhookNames(evs []webhook.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Name == webhook.Reset {
			continue
		}
		s := e.Name
		for _, f := range []string{e.Room, e.User} {
			if f != "" {
				s += " " + f
			}
		}
		out = append(out, s)
	}
	return out
}

// waitEvents waits until rcv holds n events (the reset included).
func waitEvents(t *testing.T, rcv *webhook.Receiver, n int) []webhook.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := rcv.Changed()
		if evs := rcv.Events(); len(evs) >= n {
			return evs
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the receiver holds %q, want %d events", webhookNames(rcv.Events()), n)
		}
	}
}

// TestWebhooksSingleNode runs a node with webhooks against a real HTTP
// receiver: a user's connection in and out of two rooms, a message in the
// room whose publish webhook is on and one in the room whose is off.
func TestWebhooksSingleNode(t *testing.T) {
	rcv := webhook.NewReceiver([]byte(testWebhookSecret))
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	ts := startServer(t, func(c *Config) {
		c.Webhook = WebhookConfig{URL: hook.URL, Secret: testWebhookSecret, PublishRoom: func(room string) bool { return room == "loud" }}
	})
	ann := dial(t, ts.url("/ws/loud?name=ann"))
	ann.joined()
	ann.sendJSON(map[string]any{"type": "join", "room": "quiet"})
	ann.nextOfType("joined")
	ann.sendJSON(msg("hello", "room", "loud"))
	ann.nextChat()
	ann.sendJSON(msg("psst", "room", "quiet"))
	ann.nextChat()
	anon := dial(t, ts.url("/ws/quiet"))
	anon.joined()
	ann.conn.Close()
	anon.conn.Close()

	evs := waitEvents(t, rcv, 1+11)
	want := []string{"user_online ann", "room_occupied loud", "member_joined loud ann",
		"room_occupied quiet", "member_joined quiet ann", "message_published loud",
		"member_left loud ann", "room_vacated loud", "member_left quiet ann", "room_vacated quiet", "user_offline ann"}
	got := webhookNames(evs)
	// The two rooms' leaves may come in either order (one connection
	// leaves its rooms at once), and quiet is vacated when the anonymous
	// connection leaves, before or after ann's offline: compare each
	// room's own order and the user's.
	for _, room := range []string{"loud", "quiet"} {
		if a, b := only(got, room), only(want, room); !slices.Equal(a, b) {
			t.Errorf("room %s: got %q, want %q", room, a, b)
		}
	}
	off := slices.Index(got, "user_offline ann")
	if got[0] != "user_online ann" || off < slices.Index(got, "member_left loud ann") || off < slices.Index(got, "member_left quiet ann") {
		t.Errorf("events %q: want online first and offline after ann left both rooms", got)
	}
	var pub webhook.Event
	for _, e := range evs {
		if e.Name == webhook.MessagePublished {
			pub = e
		}
	}
	var m map[string]any
	if err := json.Unmarshal(pub.Message, &m); err != nil || m["text"] != "hello" || m["seq"] != float64(pub.Seq) || pub.Seq != 1 {
		t.Errorf("published event %+v (message %v, %v): want hello as seq 1", pub, m, err)
	}
	st := rcv.Stats()
	if len(st.Violations) > 0 || st.BadSignatures > 0 || st.Duplicates > 0 {
		t.Errorf("receiver %+v", st)
	}
	if ws, on := ts.WebhookStats(); !on || ws.Dropped != 0 || ws.Failed != 0 {
		t.Errorf("webhook stats %+v, on %v", ws, on)
	}
	if v := rcv.View(); !reflect.DeepEqual(v, webhook.View{Members: map[string][]string{}}) {
		t.Errorf("the receiver believes %+v after everyone left", v)
	}
}

// only returns the events of room, and the user's online and offline.
func only(evs []string, room string) []string {
	var out []string
	for _, e := range evs {
		if slices.Contains([]string{"room_occupied " + room, "room_vacated " + room, "member_joined " + room + " ann",
			"member_left " + room + " ann", "message_published " + room}, e) {
			out = append(out, e)
		}
	}
	return out
}

func TestWebhookConfigIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		wc   WebhookConfig
		ok   bool
	}{
		{"off", WebhookConfig{}, true},
		{"on", WebhookConfig{URL: "http://127.0.0.1:1/hook", Secret: testWebhookSecret}, true},
		{"no scheme", WebhookConfig{URL: "127.0.0.1:1/hook", Secret: testWebhookSecret}, false},
		{"short secret", WebhookConfig{URL: "http://127.0.0.1:1/hook", Secret: "short"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Webhook = tc.wc
			if err := cfg.validate(); (err == nil) != tc.ok {
				t.Errorf("validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// nextChat returns the next chat message, skipping other frames.
func (c *client) nextChat() map[string]any {
	c.t.Helper()
	for {
		if m := c.next(); m["type"] == nil {
			return m
		}
	}
}

// TestWebhooksKeepTheClusterDirectory pins that the broker of a cluster
// node with webhooks still answers the server API's occupancy (broker.Directory)
// and that a single node's still has none (its rooms answer).
func TestWebhooksKeepTheClusterDirectory(t *testing.T) {
	rs := testsupport.StartRedis(t)
	for _, tc := range []struct {
		redis string
		want  bool
	}{{rs.URL(), true}, {"", false}} {
		ts := startServer(t, func(c *Config) {
			c.Redis = tc.redis
			c.Webhook = WebhookConfig{URL: "http://127.0.0.1:1/", Secret: testWebhookSecret}
		})
		if _, ok := ts.directory(); ok != tc.want {
			t.Errorf("redis %q: directory %v, want %v", tc.redis, ok, tc.want)
		}
	}
}
