//go:build linux

package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

const testAPIKey = "test-api-key-0123456789"

func withAPI(c *Config) { c.APIKey = testAPIKey }

// api calls the server API of ts with the test key and returns the status
// and the JSON answer.
func api(t testing.TB, ts *testServer, method, path, body string) (int, map[string]any) {
	t.Helper()
	return apiWith(t, ts, method, path, body, http.Header{"Authorization": {"Bearer " + testAPIKey}})
}

func apiWith(t testing.TB, ts *testServer, method, path, body string, h http.Header) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+ts.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s answered %d with %q: not a JSON object", method, path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, m
}

func TestAPIKey(t *testing.T) {
	off := startServer(t, nil)
	if code, m := api(t, off, "GET", "/api/node", ""); code != 404 || m["error"] != "api_off" {
		t.Errorf("without --api-key: %d %v, want 404 api_off", code, m)
	}
	if _, err := New(Config{APIKey: "short"}); err == nil || !strings.Contains(err.Error(), "at least 16 bytes") {
		t.Errorf("a short key: %v", err)
	}

	ts := startServer(t, withAPI)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"no key", http.Header{}, 401},
		{"wrong key", http.Header{"Authorization": {"Bearer " + testAPIKey + "x"}}, 401},
		{"a prefix of the key", http.Header{"X-Api-Key": {testAPIKey[:10]}}, 401},
		{"another scheme", http.Header{"Authorization": {"Basic " + testAPIKey}}, 401},
		{"bearer", http.Header{"Authorization": {"Bearer " + testAPIKey}}, 200},
		{"bearer, any case", http.Header{"Authorization": {"bearer " + testAPIKey}}, 200},
		{"X-API-Key", http.Header{"X-Api-Key": {testAPIKey}}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m := apiWith(t, ts, "GET", "/api/node", "", tc.header)
			if code != tc.want {
				t.Errorf("status %d (%v), want %d", code, m, tc.want)
			}
			if code == 401 && (m["error"] != "unauthorized" || m["message"] == "") {
				t.Errorf("a refusal must say why in one sentence: %v", m)
			}
		})
	}
	before := ts.Stats().API["unauthorized"]
	apiWith(t, ts, "GET", "/api/rooms", "", http.Header{})
	if after := ts.Stats().API["unauthorized"]; after != before+1 {
		t.Errorf("unauthorized requests counted %d → %d", before, after)
	}
}

func TestAPIBadInput(t *testing.T) {
	ts := startServer(t, func(c *Config) { withAPI(c); c.MaxMessageSize = 1024 })
	for _, tc := range []struct {
		method, path, body string
		status             int
		says               string
	}{
		{"POST", "/api/rooms/r/publish", "", 400, "not a chat message"},
		{"POST", "/api/rooms/r/publish", "{", 400, "not a chat message"},
		{"POST", "/api/rooms/r/publish", `{"sender":"x"}`, 400, "not a chat message"},
		{"POST", "/api/rooms/r/publish", `{"type":"join","room":"r"}`, 400, "must be a chat message"},
		{"POST", "/api/rooms/r/publish", `{"text":"x","room":"other"}`, 400, "room of the URL"},
		{"POST", "/api/rooms/r/publish", "{\"text\":\"\xff\"}", 400, "UTF-8"},
		{"POST", "/api/rooms/r/publish", `{"text":"` + strings.Repeat("x", 2000) + `"}`, 413, "larger than"},
		{"POST", "/api/rooms/bad%20room/publish", `{"text":"x"}`, 400, "room name"},
		{"GET", "/api/rooms/" + strings.Repeat("r", 65) + "/presence", "", 400, "room name"},
		{"GET", "/api/rooms/r/history?since=-1", "", 400, "since"},
		{"GET", "/api/rooms/r/history?limit=0", "", 400, "limit"},
		{"GET", "/api/rooms/r/history?limit=1001", "", 400, "limit"},
		{"GET", "/api/rooms/r/history?epoch=%21", "", 400, "epoch"},
		{"POST", "/api/connections/nonsense/disconnect", "", 400, "connection id"},
		{"POST", "/api/connections/abc-0/disconnect", "", 400, "connection id"},
		{"POST", "/api/users/alice/disconnect", "{", 400, "reason"},
		{"POST", "/api/users/alice/disconnect", `{"reason":"` + strings.Repeat("x", 121) + `"}`, 400, "reason"},
		{"POST", "/api/users/%01/disconnect", "", 400, "user"},
		{"GET", "/api/nothing", "", 404, "has no GET /api/nothing"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, m := api(t, ts, tc.method, tc.path, tc.body)
			msg, _ := m["message"].(string)
			if code != tc.status || !strings.Contains(msg, tc.says) || strings.Contains(msg, "\n") {
				t.Errorf("got %d %v, want %d saying %q in one line", code, m, tc.status, tc.says)
			}
		})
	}
	if n := ts.Stats().API["bad_request"]; n < 10 {
		t.Errorf("bad requests counted: %d", n)
	}
	// The server still serves.
	if code, _ := api(t, ts, "POST", "/api/rooms/r/publish", `{"text":"ok"}`); code != 200 {
		t.Errorf("a good publish after bad ones: %d", code)
	}
}

// TestAPISingleNode runs every endpoint against one node with real clients.
func TestAPISingleNode(t *testing.T) {
	ts := startServer(t, func(c *Config) { withAPI(c); c.History = 10 })
	alice := dial(t, ts.url("/ws/r?name=alice"))
	aj, _ := alice.joined()
	anon := dial(t, ts.url("/ws/r"))
	anon.joined()
	bob := dial(t, ts.url("/ws/s?name=bob"))
	bj, _ := bob.joined()

	for i := 1; i <= 12; i++ {
		code, m := api(t, ts, "POST", "/api/rooms/r/publish", fmt.Sprintf(`{"text":"n%d","sender":"backend","extra":{"k":%d}}`, i, i))
		if code != 200 || m["seq"] != float64(i) || m["room"] != "r" {
			t.Fatalf("publish %d: %d %v", i, code, m)
		}
		for _, c := range []*client{alice, anon} {
			got := c.next()
			if got["seq"] != float64(i) || got["text"] != fmt.Sprintf("n%d", i) || got["sender"] != "backend" || got["room"] != "r" {
				t.Fatalf("member got %v for publish %d", got, i)
			}
		}
	}

	_, rooms := api(t, ts, "GET", "/api/rooms", "")
	want := []any{map[string]any{"room": "r", "members": 2.0}, map[string]any{"room": "s", "members": 1.0}}
	if !reflect.DeepEqual(rooms["rooms"], want) {
		t.Errorf("rooms = %v, want %v", rooms["rooms"], want)
	}
	_, p := api(t, ts, "GET", "/api/rooms/r/presence", "")
	if p["members"] != 2.0 || p["anonymous"] != 1.0 || !reflect.DeepEqual(p["users"], []any{map[string]any{"user": "alice", "connections": 1.0}}) {
		t.Errorf("presence = %v", p)
	}
	if _, p := api(t, ts, "GET", "/api/rooms/empty/presence", ""); p["members"] != 0.0 || !reflect.DeepEqual(p["users"], []any{}) {
		t.Errorf("presence of an empty room = %v", p)
	}

	for _, tc := range []struct {
		query     string
		first, n  int
		wantGap   bool
		wantReset bool
	}{
		{"", 3, 10, false, false},                // the last 10 held (history is 10)
		{"?limit=4", 9, 4, false, false},         // the last 4
		{"?since=5&limit=3", 6, 3, false, false}, // the first 3 after 5
		{"?since=11", 12, 1, false, false},
		{"?since=12", 0, 0, false, false},
		{"?since=1", 3, 10, true, false}, // 2 is gone
	} {
		code, h := api(t, ts, "GET", "/api/rooms/r/history"+tc.query, "")
		msgs, _ := h["messages"].([]any)
		if code != 200 || len(msgs) != tc.n || h["seq"] != 12.0 || h["epoch"] == "" || (h["history_gap"] != nil) != tc.wantGap {
			t.Errorf("history%s: %d %v", tc.query, code, h)
			continue
		}
		for i, m := range msgs {
			if seq := m.(map[string]any)["seq"]; seq != float64(tc.first+i) {
				t.Errorf("history%s: message %d has seq %v, want %d", tc.query, i, seq, tc.first+i)
			}
		}
	}

	_, node := api(t, ts, "GET", "/api/node", "")
	if node["connections"] != 3.0 || node["cluster"] != false || node["broker_up"] != true || !strings.HasPrefix(aj["connection"].(string), node["id"].(string)+"-") {
		t.Errorf("node = %v (alice joined as %v)", node, aj["connection"])
	}
	// A single node's list of nodes is itself, once announced.
	if node["nodes"] != nil {
		t.Errorf("nodes before the node announced itself: %v", node["nodes"])
	}
	ts.Announce("solo", "http://127.0.0.1:1/metrics")
	if _, node = api(t, ts, "GET", "/api/node", ""); node["node"] != "solo" || !reflect.DeepEqual(node["nodes"], []any{"solo"}) {
		t.Errorf("node once announced = %v", node)
	}

	// One connection by its id; the others stay.
	if code, m := api(t, ts, "POST", "/api/connections/"+bj["connection"].(string)+"/disconnect", `{"reason":"moderated"}`); code != 200 {
		t.Fatalf("disconnect bob's connection: %d %v", code, m)
	}
	f, err := bob.readFrame(5 * time.Second)
	if code, reason := closeOf(f); err != nil || code != 4001 || reason != "moderated" {
		t.Errorf("bob: close %d %q (%v), want 4001 moderated", code, reason, err)
	}
	bob.finishClose()
	// Every connection of a user.
	alice2 := dial(t, ts.url("/ws/s?name=alice"))
	alice2.joined()
	if code, m := api(t, ts, "POST", "/api/users/alice/disconnect", ""); code != 200 {
		t.Fatalf("disconnect alice: %d %v", code, m)
	}
	for _, c := range []*client{alice, alice2} {
		if code := c.expectClose(); code != 4001 {
			t.Errorf("alice: close %d, want 4001", code)
		}
		c.finishClose()
	}
	anon.sendJSON(msg("still here"))
	if m := anon.next(); m["text"] != "still here" {
		t.Errorf("the anonymous member got %v", m)
	}
	testsupport.Eventually(t, 5*time.Second, "the 4001 closes counted", func() bool {
		return ts.Stats().Disconnects[4001] == 3
	})
}

// TestAPICluster asks each endpoint of one node about members of another,
// through Redis and through a Redis Cluster.
func TestAPICluster(t *testing.T) { engines(t, testAPICluster) }

func testAPICluster(t *testing.T, url string) {
	nodes := startCluster(t, url, 2, withAPI)
	a, b := nodes[0], nodes[1]
	for _, n := range nodes {
		n.Announce(n.addr, "http://"+n.addr+"/metrics")
	}
	alice := dial(t, a.url("/ws/r?name=alice"))
	alice.joined()
	bob := dial(t, b.url("/ws/r?name=bob"))
	bob.joined()
	carol := dial(t, b.url("/ws/s?name=carol"))
	carol.joined()

	// Published on a node where neither room has a member.
	for i := 1; i <= 3; i++ {
		code, m := api(t, b, "POST", "/api/rooms/r/publish", fmt.Sprintf(`{"text":"p%d"}`, i))
		if code != 200 || m["seq"] != float64(i) {
			t.Fatalf("publish %d on b: %d %v", i, code, m)
		}
	}
	code, m := api(t, a, "POST", "/api/rooms/r/publish", `{"text":"p4"}`)
	if code != 200 || m["seq"] != 4.0 {
		t.Fatalf("publish on a: %d %v", code, m)
	}
	for _, c := range []*client{alice, bob} {
		for i := 1; i <= 4; i++ {
			if got := c.next(); got["seq"] != float64(i) || got["text"] != fmt.Sprintf("p%d", i) {
				t.Fatalf("member got %v, want p%d", got, i)
			}
		}
	}

	// s is owned by b, its only node: publishes on a, which loads the room
	// as they come, wait for b to hand it over, then go out. (They were
	// once held for ever: the load and the held publishes both waited for
	// b's release, and only one heard it.)
	carol.sendJSON(msg("to carol 1")) // b orders it, and so owns s
	if got := carol.next(); got["seq"] != 1.0 {
		t.Fatalf("carol got %v", got)
	}
	for i := 2; i <= 4; i++ {
		resp, err := http.Post("http://"+a.addr+"/rooms/s/messages", "application/json", strings.NewReader(fmt.Sprintf(`{"text":"to carol %d"}`, i)))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("post %d on a: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	code, m = api(t, a, "POST", "/api/rooms/s/publish", `{"text":"to carol 5"}`)
	if code != 200 || m["seq"] != 5.0 {
		t.Fatalf("publish on a into the room b owns: %d %v", code, m)
	}
	for i := 2; i <= 5; i++ {
		if got := carol.next(); got["seq"] != float64(i) || got["text"] != fmt.Sprintf("to carol %d", i) {
			t.Fatalf("carol got %v, want message %d", got, i)
		}
	}

	want := []any{map[string]any{"room": "r", "members": 2.0}, map[string]any{"room": "s", "members": 1.0}}
	for _, n := range nodes {
		testsupport.Eventually(t, 5*time.Second, "the rooms of both nodes", func() bool {
			_, rooms := api(t, n, "GET", "/api/rooms", "")
			return reflect.DeepEqual(rooms["rooms"], want)
		})
	}
	_, p := api(t, a, "GET", "/api/rooms/r/presence", "")
	wantUsers := []any{map[string]any{"user": "alice", "connections": 1.0}, map[string]any{"user": "bob", "connections": 1.0}}
	if p["members"] != 2.0 || !reflect.DeepEqual(p["users"], wantUsers) {
		t.Errorf("presence from a = %v", p)
	}
	// History of a room loaded on a node that never had it.
	c := startCluster(t, url, 1, withAPI)[0]
	c.Announce(c.addr, "http://"+c.addr+"/metrics")
	_, h := api(t, c, "GET", "/api/rooms/r/history?since=2", "")
	if msgs, _ := h["messages"].([]any); len(msgs) != 2 || msgs[0].(map[string]any)["text"] != "p3" || h["seq"] != 4.0 {
		t.Errorf("history from a third node = %v", h)
	}
	testsupport.Eventually(t, 10*time.Second, "three nodes in node info", func() bool {
		_, info := api(t, c, "GET", "/api/node", "")
		nodes, _ := info["nodes"].([]any)
		return info["cluster"] == true && len(nodes) == 3
	})

	// Disconnects asked of a reach the members of b.
	if code, m := api(t, a, "POST", "/api/users/carol/disconnect", ""); code != 200 {
		t.Fatalf("disconnect carol: %d %v", code, m)
	}
	if code := carol.expectClose(); code != 4001 {
		t.Errorf("carol: close %d, want 4001", code)
	}
	bob.sendJSON(msg("after"))
	if got := bob.next(); got["text"] != "after" {
		t.Errorf("bob got %v", got)
	}
}

// TestAPIDocExamples runs every curl command of docs/api.md against a real
// node, as a reader would paste it: each must answer JSON, and the one that
// shows an error must get it.
func TestAPIDocExamples(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, withAPI)
	member := dial(t, ts.url("/ws/lobby?name=alice"))
	member.joined()
	var cmds []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		text := strings.ReplaceAll(block[1], "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "curl ") {
				cmds = append(cmds, strings.ReplaceAll(line, "127.0.0.1:8080", ts.addr))
			}
		}
	}
	if len(cmds) < 8 {
		t.Fatalf("found %d curl examples in docs/api.md", len(cmds))
	}
	t.Logf("%d curl examples", len(cmds))
	for _, c := range cmds {
		cmd := exec.Command("sh", "-c", strings.Replace(c, "curl ", curl+" ", 1))
		cmd.Env = append(os.Environ(), "SCALECHAT_API_KEY="+testAPIKey)
		out, err := cmd.Output()
		var v map[string]any
		if err != nil || json.Unmarshal(out, &v) != nil {
			t.Errorf("%s: %v, answered %q", c, err, out)
			continue
		}
		if _, isErr := v["error"]; isErr != strings.Contains(c, `'{"sender":"x"}'`) {
			t.Errorf("%s answered %s", c, out)
		}
	}
}
