package namespace

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// parse parses text as a file holding a namespaces: section.
func parse(t *testing.T, text string) (Set, []string) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	root := doc.Content[0]
	set, errs := Parse(root.Content[1])
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return set, msgs
}

func TestParseOptions(t *testing.T) {
	set, errs := parse(t, `namespaces:
  chat:
    history: 0
    history_ttl: 10m
    presence: false
    join_leave_events: false
    publish: backend
    join_token: true
    join_hook: true
    max_members: 3
    hooks: [join, publish]
    webhooks: [room_occupied, message_published]
  plain:
`)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := Options{Name: "chat", History: 0, HistorySet: true, HistoryTTL: 10 * time.Minute, NoPresence: true, NoJoinLeave: true,
		Publish: PublishBackend, JoinToken: true, JoinHook: true, MaxMembers: 3,
		Hooks: []string{"join", "publish"}, HooksSet: true, Webhooks: []string{"room_occupied", "message_published"}, WebhooksSet: true}
	got := *set["chat"]
	if !equal(got, want) {
		t.Errorf("chat = %+v, want %+v", got, want)
	}
	if p := *set["plain"]; !equal(p, Options{Name: "plain"}) {
		t.Errorf("plain = %+v, want its defaults", p)
	}
}

func equal(a, b Options) bool {
	return reflect.DeepEqual(a, b)
}

// TestParseErrors pins every error sentence, with its line.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"history negative", "history: -1", `line 3: namespace "chat": history must be between 0 and 100000, got -1`},
		{"history too large", "history: 100001", `line 3: namespace "chat": history must be between 0 and 100000, got 100001`},
		{"history text", "history: lots", `line 3: namespace "chat": history must be a whole number, got "lots"`},
		{"history list", "history: [1]", `line 3: namespace "chat": history must be a whole number, got a list`},
		{"ttl not a duration", "history_ttl: soon", `line 3: namespace "chat": history_ttl must be a duration such as 90s or 10m, got "soon"`},
		{"ttl number", "history_ttl: 10", `line 3: namespace "chat": history_ttl must be a duration such as 90s or 10m, got 10`},
		{"ttl negative", "history_ttl: -1s", `line 3: namespace "chat": history_ttl must be 0 (the server's default) or between 1s and 8760h, got -1s`},
		{"ttl under a second", "history_ttl: 500ms", `line 3: namespace "chat": history_ttl must be 0 (the server's default) or between 1s and 8760h, got 500ms`},
		{"presence text", "presence: maybe", `line 3: namespace "chat": presence must be true or false, got "maybe"`},
		{"events number", "join_leave_events: 1", `line 3: namespace "chat": join_leave_events must be true or false, got 1`},
		{"publish", "publish: everyone", `line 3: namespace "chat": publish must be clients or backend, got "everyone"`},
		{"join_token", "join_token: yes please", `line 3: namespace "chat": join_token must be true or false, got "yes please"`},
		{"join_hook", "join_hook: {}", `line 3: namespace "chat": join_hook must be true or false, got a mapping`},
		{"max_members negative", "max_members: -5", `line 3: namespace "chat": max_members must be between 0 and 10000000, got -5`},
		{"hooks unknown", "hooks: [connect]", `line 3: namespace "chat": hooks: "connect" is not one of join, publish`},
		{"hooks twice", "hooks: [join, join]", `line 3: namespace "chat": hooks: join is listed twice`},
		{"hooks not a list", "hooks: join", `line 3: namespace "chat": hooks must be a list of join, publish, got "join"`},
		{"webhooks unknown", "webhooks: [user_online]", `line 3: namespace "chat": webhooks: "user_online" is not one of room_occupied, room_vacated, member_joined, member_left, message_published`},
		{"webhooks misspelled", "webhooks: [user_joined]", `line 3: namespace "chat": webhooks: "user_joined" is not one of room_occupied, room_vacated, member_joined, member_left, message_published`},
		{"unknown option", "histroy: 5", `line 3: namespace "chat": unknown option "histroy" (known: history, history_ttl, hooks, join_hook, join_leave_events, join_token, max_members, presence, publish, webhooks)`},
		{"set twice", "history: 5\n    history: 6", `line 4: namespace "chat": history is set twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := parse(t, "namespaces:\n  chat:\n    "+tc.body+"\n")
			if len(errs) != 1 || errs[0] != tc.want {
				t.Errorf("errors = %q\nwant   [%q]", errs, tc.want)
			}
		})
	}
}

func TestParseNamespaceErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"bad name", "namespaces:\n  a:b:\n    history: 1\n", `line 2: namespace "a:b": a namespace's name is 1 to 32 characters of A-Z a-z 0-9 . _ -`},
		{"twice", "namespaces:\n  a: {}\n  a: {}\n", `line 3: namespace "a" is defined twice`},
		{"not a mapping", "namespaces: [a, b]\n", `line 1: namespaces must be a mapping of names to options, got a list`},
		{"options not a mapping", "namespaces:\n  a: 5\n", `line 2: namespace "a": its options must be a mapping, got a value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := parse(t, tc.text)
			if len(errs) != 1 || errs[0] != tc.want {
				t.Errorf("errors = %q\nwant   [%q]", errs, tc.want)
			}
		})
	}
}

// TestParseEveryError: errors do not stop the parse; each one is reported.
func TestParseEveryError(t *testing.T) {
	_, errs := parse(t, "namespaces:\n  a:\n    history: -1\n    presence: 2\n  b:\n    publish: x\n")
	if len(errs) != 3 || !strings.HasPrefix(errs[0], "line 3:") || !strings.HasPrefix(errs[1], "line 4:") || !strings.HasPrefix(errs[2], "line 6:") {
		t.Errorf("errors = %q, want lines 3, 4 and 6", errs)
	}
}

func TestLookup(t *testing.T) {
	set := Set{"chat": {Name: "chat", MaxMembers: 2}}
	for _, tc := range []struct {
		room   string
		want   string
		wantOK bool
	}{
		{"lobby", "", true},
		{"chat:1", "chat", true},
		{"chat:a:b", "chat", true},
		{"news:1", "", false},
	} {
		o, ok := set.Lookup(tc.room)
		if ok != tc.wantOK || ok && o.Name != tc.want {
			t.Errorf("Lookup(%q) = %+v, %v; want namespace %q, %v", tc.room, o, ok, tc.want, tc.wantOK)
		}
	}
	if name, ok := (Set{"b": {JoinToken: true}, "a": {JoinToken: true}}).NeedsToken(); !ok || name != "a" {
		t.Errorf("NeedsToken = %q, %v; want a, true", name, ok)
	}
}

// TestDocsListEveryOption keeps docs/config.md's table of options and the
// parser in step.
func TestDocsListEveryOption(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range OptionKeys() {
		if !strings.Contains(string(doc), "| `"+k+"` |") {
			t.Errorf("docs/config.md has no row for the option %s", k)
		}
	}
	for _, name := range append(append([]string{}, HookNames...), WebhookEvents...) {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/config.md does not name %s", name)
		}
	}
}

// TestHooksAndWebhooksOfARoom pins the rule of docs/config.md's table: no
// key, every hook and the server's default events; a list, those listed
// (an empty one, none); join_hook, the join hook whatever hooks says.
func TestHooksAndWebhooksOfARoom(t *testing.T) {
	set, errs := parse(t, `namespaces:
  listed:
    hooks: [publish]
    webhooks: [room_occupied, message_published]
  none:
    hooks: []
    webhooks: []
  gated:
    join_hook: true
    hooks: []
  plain:
    history: 5
`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	room := func(name string) *Options {
		o, ok := set.Lookup(name)
		if !ok {
			t.Fatalf("no options for %s", name)
		}
		return o
	}
	for _, tc := range []struct {
		room                string
		join, publish       bool
		occupied, published bool // with the defaults: room events on, message_published off
	}{
		{"lobby", true, true, true, false},
		{"plain:1", true, true, true, false},
		{"listed:1", false, true, true, true},
		{"none:1", false, false, false, false},
		{"gated:1", true, false, true, false},
	} {
		o := room(tc.room)
		got := [4]bool{o.HasHook("join"), o.HasHook("publish"), o.HasWebhook("room_occupied", true), o.HasWebhook("message_published", false)}
		if want := [4]bool{tc.join, tc.publish, tc.occupied, tc.published}; got != want {
			t.Errorf("%s: join, publish, room_occupied, message_published = %v, want %v", tc.room, got, want)
		}
	}
	// --webhook-publish is the default of rooms whose namespace has no
	// webhooks key, not of those that list their events.
	if !room("plain:1").HasWebhook("message_published", true) || room("none:1").HasWebhook("message_published", true) {
		t.Error("message_published under --webhook-publish: want on without a webhooks key, off where the list leaves it out")
	}
	if o := room("none:1"); o.Hooks == nil || !o.HooksSet || o.Webhooks == nil || !o.WebhooksSet {
		t.Errorf("an empty list must not read as an absent key: %+v", o)
	}
}
