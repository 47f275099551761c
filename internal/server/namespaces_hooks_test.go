//go:build linux

package server

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/namespace"
	"github.com/scalechat/scalechat/internal/testsupport"
	"github.com/scalechat/scalechat/internal/webhook"
)

// parseNamespaces reads a namespaces: section as a configuration file
// gives it, so that a test sees what the parser makes of an absent key
// and an empty list.
func parseNamespaces(t *testing.T, text string) namespace.Set {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("namespaces:\n"+text), &doc); err != nil {
		t.Fatal(err)
	}
	set, errs := namespace.Parse(doc.Content[0].Content[1])
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return set
}

// TestNamespaceHooks runs a node calling a real join and publish hook:
// a room without a namespace and a namespace without a hooks key get both,
// hooks: [] none, join_hook: true the join hook whatever hooks says; the
// WebSocket and the HTTP transport alike.
func TestNamespaceHooks(t *testing.T) {
	b := newHookBackend(t, func(hook string, req map[string]any) any {
		if hook == "join" && strings.HasSuffix(req["room"].(string), "secret") {
			return map[string]any{"allow": false, "reason": "members only"}
		}
		if hook == "publish" {
			text := req["message"].(map[string]any)["text"].(string)
			return map[string]any{"allow": true, "message": map[string]any{"text": "hooked " + text}}
		}
		return map[string]any{"allow": true}
	})
	ts := startServer(t, func(c *Config) {
		hooksOn(b.URL, hooks.Join, hooks.Publish)(c)
		c.Namespaces = parseNamespaces(t, "  plain:\n    history: 5\n  quiet:\n    hooks: []\n  gated:\n    join_hook: true\n    hooks: []\n")
		c.RateLimit, c.RateBurst = 1000, 1000
	})
	for _, tc := range []struct {
		prefix        string
		join, publish bool // the hooks asked
	}{
		{"", true, true},
		{"plain:", true, true},
		{"quiet:", false, false},
		{"gated:", true, false},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			joins, pubs := len(b.requests("join")), len(b.requests("publish"))
			c := dial(t, ts.url("/ws/"+tc.prefix+"open"))
			c.joined()
			c.sendJSON(map[string]any{"type": "join", "room": tc.prefix + "secret"})
			if tc.join {
				if e := c.next(); e["type"] != "error" || e["code"] != CodeRefused || e["message"] != "members only" {
					t.Errorf("a join the backend refuses: %v", e)
				}
			} else if j, _ := c.joined(); j["room"] != tc.prefix+"secret" {
				t.Errorf("a join without the join hook: %v", j)
			}
			c.sendJSON(msg("hi", "room", tc.prefix+"open"))
			want := "hi"
			if tc.publish {
				want = "hooked hi"
			}
			if m := c.nextChat(); m["text"] != want {
				t.Errorf("message %v, want the text %q", m, want)
			}
			// The HTTP transport: a poll of the room the backend refuses,
			// a POST to the open one.
			_, code := poll(t, ts.addr, tc.prefix+"secret", "?since=0")
			if wantCode := map[bool]int{true: 403, false: 200}[tc.join]; code != wantCode {
				t.Errorf("a poll of %ssecret: %d, want %d", tc.prefix, code, wantCode)
			}
			if code, m := post(t, ts.addr, tc.prefix+"open", msg("posted"), nil); code != 202 {
				t.Errorf("POST: %d %v", code, m)
			}
			want = "posted"
			if tc.publish {
				want = "hooked posted"
			}
			if m := c.nextChat(); m["text"] != want {
				t.Errorf("posted message %v, want the text %q", m, want)
			}
			// The URL's room, the join frame, each poll (two) and POST
			// asks the join hook; the message and the POST the publish one.
			gotJoins, gotPubs := len(b.requests("join"))-joins, len(b.requests("publish"))-pubs
			if wantJoins := map[bool]int{true: 4, false: 0}[tc.join]; gotJoins != wantJoins {
				t.Errorf("join hook called %d times, want %d", gotJoins, wantJoins)
			}
			if wantPubs := map[bool]int{true: 2, false: 0}[tc.publish]; gotPubs != wantPubs {
				t.Errorf("publish hook called %d times, want %d", gotPubs, wantPubs)
			}
		})
	}
}

// TestNamespaceJoinHookNeedsHookJoin: a namespace whose joins need the
// join hook, on a server that calls none, is a configuration error.
func TestNamespaceJoinHookNeedsHookJoin(t *testing.T) {
	const sentence = `namespace "gated" needs the join hook's yes for each join (join_hook), but the server calls no join hook: set --hook-join`
	for _, tc := range []struct {
		name string
		join string
		ok   bool
	}{
		{"no join hook", "", false},
		{"a join hook", "http://127.0.0.1:1/join", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Namespaces = parseNamespaces(t, "  gated:\n    join_hook: true\n")
			cfg.Hooks.JoinURL, cfg.Hooks.Secret = tc.join, hookSecret
			err := cfg.Validate()
			if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), sentence) {
				t.Errorf("Validate = %v, want ok %v (else %q)", err, tc.ok, sentence)
			}
		})
	}
}

// TestNamespaceWebhooks runs a node with webhooks against a real receiver:
// a namespace listing room_occupied sends it alone for its rooms, one
// listing message_published sends that (without --webhook-publish) and
// none of the room events, a room without a namespace sends them all; the
// user's online and offline are sent whatever the rooms' lists.
func TestNamespaceWebhooks(t *testing.T) {
	rcv := webhook.NewReceiver([]byte(testWebhookSecret))
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	ts := startServer(t, func(c *Config) {
		c.Webhook = WebhookConfig{URL: hook.URL, Secret: testWebhookSecret}
		c.Namespaces = parseNamespaces(t, "  few:\n    webhooks: [room_occupied]\n  pub:\n    webhooks: [message_published]\n")
	})
	ann := dial(t, ts.url("/ws/lobby?name=ann"))
	ann.joined()
	for _, r := range []string{"few:1", "pub:1"} {
		ann.sendJSON(map[string]any{"type": "join", "room": r})
		ann.nextOfType("joined")
	}
	for _, r := range []string{"lobby", "few:1", "pub:1"} {
		ann.sendJSON(msg("hello", "room", r))
		ann.nextChat()
	}
	ann.conn.Close()

	// user_offline is decided after every leave of ann's rooms: once it
	// is in, so is (or was filtered) everything before it.
	evs := waitEvents(t, rcv, 1+8)
	got := webhookNames(evs)
	for _, tc := range []struct {
		room string
		want []string
	}{
		{"lobby", []string{"room_occupied lobby", "member_joined lobby ann", "member_left lobby ann", "room_vacated lobby"}},
		{"few:1", []string{"room_occupied few:1"}},
		{"pub:1", []string{"message_published pub:1"}},
	} {
		var of []string
		for _, e := range got {
			if f := strings.Fields(e); len(f) > 1 && f[1] == tc.room {
				of = append(of, e)
			}
		}
		if !slices.Equal(of, tc.want) {
			t.Errorf("room %s: got %q, want %q", tc.room, of, tc.want)
		}
	}
	if got[0] != "user_online ann" || got[len(got)-1] != "user_offline ann" || len(got) != 8 {
		t.Errorf("events %q: want online first, offline last, 8 in all", got)
	}
	st, _ := ts.WebhookStats()
	// few:1's member_joined, member_left, room_vacated; pub:1's four.
	// They were filtered before user_offline was sent (Sent is counted
	// after the answer: not final here).
	if st.Filtered != 7 || st.Dropped != 0 {
		t.Errorf("webhook stats %+v: want 7 filtered, none dropped", st)
	}
	if rs := rcv.Stats(); len(rs.Violations) > 0 || rs.BadSignatures > 0 {
		t.Errorf("receiver %+v", rs)
	}
}

// TestNamespaceWebhooksCluster: two nodes on a real redis-server send one
// receiver their webhooks; the node that dispatches filters the room
// events of a namespace listing room_occupied alone, and a namespace
// listing message_published sends the messages of members and of the
// server API, once each: the node that orders the room tells them (the
// room's resolved option), here the members' node, for an API publish
// made on the other.
func TestNamespaceWebhooksCluster(t *testing.T) {
	rcv := webhook.NewReceiver([]byte(testWebhookSecret))
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	ns := parseNamespaces(t, "  few:\n    webhooks: [room_occupied]\n  pub:\n    webhooks: [message_published]\n")
	nodes := startCluster(t, testsupport.StartRedis(t).URL(), 2, func(c *Config) {
		c.Webhook = WebhookConfig{URL: hook.URL, Secret: testWebhookSecret}
		c.Namespaces = ns
		c.APIKey = testAPIKey
	})
	ann := dial(t, nodes[0].url("/ws/few:1?name=ann"))
	ann.joined()
	bob := dial(t, nodes[1].url("/ws/pub:1?name=bob"))
	bob.joined()
	bob.sendJSON(msg("from bob"))
	bob.nextChat()
	if code, m := api(t, nodes[0], "POST", "/api/rooms/pub:1/publish", `{"text":"from the API","sender":"backend"}`); code != 200 {
		t.Fatalf("API publish: %d %v", code, m)
	}
	bob.nextChat()
	ann.conn.Close()
	bob.conn.Close()

	// reset, ann's and bob's online and offline, few:1's occupied, pub:1's
	// two messages: once both are offline, every event before is in.
	deadline := time.After(15 * time.Second)
	for {
		changed := rcv.Changed()
		got := webhookNames(rcv.Events())
		if slices.Contains(got, "user_offline ann") && slices.Contains(got, "user_offline bob") && len(got) >= 7 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the receiver holds %q", got)
		}
	}
	got := webhookNames(rcv.Events())
	slices.Sort(got)
	want := []string{"message_published pub:1", "message_published pub:1", "room_occupied few:1",
		"user_offline ann", "user_offline bob", "user_online ann", "user_online bob"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q\nwant   %q", got, want)
	}
	if rs := rcv.Stats(); len(rs.Violations) > 0 || rs.BadSignatures > 0 || rs.Duplicates > 0 {
		t.Errorf("receiver %+v", rs)
	}
}
