package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"
)

var fixedTime = time.Date(2026, 11, 21, 10, 0, 0, 124031999, time.UTC)

// decodeObject decodes b, which must be one valid JSON object, keeping
// numbers exact.
func decodeObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("not valid JSON: %s", b)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// topLevelKeys returns the keys of the JSON object b in order, unescaped.
func topLevelKeys(t testing.TB, b []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s does not start an object: %v %v", b, tok, err)
	}
	var keys []string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestAppendChat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // exact output
	}{
		{
			"protocol example",
			`{"message_id": 7, "text": "hello", "sender": "alice", "sent_at": "2026-11-21T10:00:00.123Z", "room": "lobby"}`,
			`{"room":"lobby","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","message_id":7,"text":"hello","sender":"alice","sent_at":"2026-11-21T10:00:00.123Z"}`,
		},
		{
			"compact input copied in one run",
			`{"message_id":7,"text":"hello","sender":"alice"}`,
			`{"room":"lobby","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","message_id":7,"text":"hello","sender":"alice"}`,
		},
		{
			"server fields and type dropped wherever they are",
			`{"seq":1,"type":"message","text":"a","server_at":"x","room":"lobby","seq":2,"x":1}`,
			`{"room":"lobby","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","text":"a","x":1}`,
		},
		{
			"escaped server keys dropped too",
			`{"\u0073eq":1,"text":"a","ro\u006fm":"lobby"}`,
			`{"room":"lobby","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","text":"a"}`,
		},
		{
			"values kept byte for byte",
			"{\"text\":\"\\u00e9\\n\\ud83d\\ude00\",\"n\":1.50E+02,\"o\":{ \"a\" : [ 1 , true ] },\"k\\u0065y\":null}",
			"{\"room\":\"lobby\",\"seq\":42,\"server_at\":\"2026-11-21T10:00:00.124031Z\",\"text\":\"\\u00e9\\n\\ud83d\\ude00\",\"n\":1.50E+02,\"o\":{ \"a\" : [ 1 , true ] },\"k\\u0065y\":null}",
		},
		{
			"unknown duplicate fields kept",
			`{"text":"a","x":1,"x":2}`,
			`{"room":"lobby","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","text":"a","x":1,"x":2}`,
		},
		{
			"whitespace around members dropped",
			" { \"text\" : \"a\" ,\n\"x\"\t:\t1 } ",
			`{"room":"lobby","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","text":"a","x":1}`,
		},
	}
	var f Frame
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.in)
			if err := ParseFrame(data, &f); err != nil {
				t.Fatal(err)
			}
			got := AppendChat([]byte("prefix"), "lobby", 42, fixedTime, &f, data)
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatalf("dst overwritten: %s", got)
			}
			got = got[len("prefix"):]
			if string(got) != tt.want {
				t.Fatalf("AppendChat =\n%s\nwant\n%s", got, tt.want)
			}
			checkChat(t, data, got, "lobby", 42, fixedTime)
		})
	}
}

// checkChat checks the broadcast out of the chat message in against
// encoding/json: it is one object whose first members are room, seq and
// server_at, followed by every member of in except type, seq, server_at and
// room, with the same values.
func checkChat(t testing.TB, in, out []byte, room string, seq uint64, at time.Time) {
	t.Helper()
	got := decodeObject(t, out)
	keys := topLevelKeys(t, out)
	if len(keys) < 3 || keys[0] != "room" || keys[1] != "seq" || keys[2] != "server_at" {
		t.Fatalf("%s does not start with room, seq, server_at", out)
	}
	want := decodeObject(t, in)
	delete(want, "type")
	want["room"] = room
	want["seq"] = json.Number(strconv.FormatUint(seq, 10))
	want["server_at"] = at.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("broadcast of\n%s\ndecodes to\n%v\nwant\n%v", in, got, want)
	}
	// The same members, in order, duplicates included.
	var wantKeys []string
	for _, k := range topLevelKeys(t, in) {
		switch k {
		case "type", "seq", "server_at", "room":
		default:
			wantKeys = append(wantKeys, k)
		}
	}
	if !reflect.DeepEqual(keys[3:], wantKeys) && !(len(keys) == 3 && len(wantKeys) == 0) {
		t.Fatalf("members %q, want %q", keys[3:], wantKeys)
	}
}

func TestAppendTime(t *testing.T) {
	times := []time.Time{
		fixedTime,
		time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 999, time.UTC), // below a microsecond: truncated
		time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 6, 1, 1, 0, 0, 0, time.FixedZone("X", -7*3600)), // converted to UTC
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
	}
	for _, tm := range times {
		want := tm.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
		if got := string(appendTime(nil, tm)); got != want {
			t.Errorf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	}
	got := string(appendTime(nil, time.Date(2026, 6, 1, 1, 0, 0, 5000, time.FixedZone("X", -7*3600))))
	if got != "2026-06-01T08:00:00.000005Z" {
		t.Errorf("appendTime in UTC-7 = %s", got)
	}
}

func TestAppendServerFrames(t *testing.T) {
	f := &Frame{HasMessageID: true, MessageID: 7, Room: []byte("lobby")}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"joined", AppendJoined(nil, "lobby", "k2m4q9x0abcd", 41, 3, 2, ""), `{"type":"joined","room":"lobby","epoch":"k2m4q9x0abcd","seq":41,"members":3,"history":2}`},
		{"joined empty room", AppendJoined(nil, "r", "e", 0, 1, 0, "k2m4q9x0-7"), `{"type":"joined","room":"r","epoch":"e","seq":0,"members":1,"history":0,"connection":"k2m4q9x0-7"}`},
		{"joined max seq", AppendJoined(nil, "r", "e", 1<<64-1, 1, 100, ""), `{"type":"joined","room":"r","epoch":"e","seq":18446744073709551615,"members":1,"history":100}`},
		{"left", AppendLeft(nil, "x", 57), `{"type":"left","room":"x","seq":57}`},
		{"presence", AppendPresenceUsers(nil, "x", 12, []UserCount{{"al\"ice", 2}, {"bob", 1}}, 9),
			`{"type":"presence","room":"x","members":12,"users":[{"user":"al\"ice","connections":2},{"user":"bob","connections":1}],"anonymous":9}`},
		{"presence, nobody named", AppendPresenceUsers(nil, "x", 1, nil, 1), `{"type":"presence","room":"x","members":1,"users":[],"anonymous":1}`},
		{"presence_join", AppendPresenceEvent(nil, "x", "zoë", true), `{"type":"presence_join","room":"x","user":"zoë"}`},
		{"presence_leave", AppendPresenceEvent(nil, "x", "bob", false), `{"type":"presence_leave","room":"x","user":"bob"}`},
		{"history_gap", AppendHistoryGap(nil, "lobby", 5, 40, false), `{"type":"history_gap","room":"lobby","since":5,"first_seq":40}`},
		{"history_gap none held", AppendHistoryGap(nil, "lobby", 5, 0, false), `{"type":"history_gap","room":"lobby","since":5,"first_seq":0}`},
		{"history_gap of another stream", AppendHistoryGap(nil, "lobby", 5, 1, true), `{"type":"history_gap","room":"lobby","since":5,"first_seq":1,"reset":true}`},
		{"error with frame", AppendError(nil, CodeRateLimited, "more than 20 messages per second", f),
			`{"type":"error","code":"rate_limited","message":"more than 20 messages per second","message_id":7,"room":"lobby"}`},
		{"error without frame", AppendError(nil, CodeInvalidJSON, "the frame is not valid JSON", nil),
			`{"type":"error","code":"invalid_json","message":"the frame is not valid JSON"}`},
		{"error frame without id or room", AppendError(nil, CodeNotJoined, "not joined", &Frame{}),
			`{"type":"error","code":"not_joined","message":"not joined"}`},
		{"error frame with id 0", AppendError(nil, CodeNotJoined, "not joined", &Frame{HasMessageID: true}),
			`{"type":"error","code":"not_joined","message":"not joined","message_id":0}`},
		{"error escapes its message", AppendError(nil, "c", "a \"quoted\" \\ line\nbreak\t\x01\x1f", nil),
			`{"type":"error","code":"c","message":"a \"quoted\" \\ line\nbreak\t\u0001\u001f"}`},
		{"error keeps UTF-8, replaces invalid bytes", AppendError(nil, "c", "é€😀 \xff\xc3", nil),
			`{"type":"error","code":"c","message":"é€😀 \ufffd\ufffd"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", tt.got, tt.want)
			}
			decodeObject(t, tt.got)
		})
	}
}

// The error frame built from a refused frame echoes what the client sent.
func TestAppendErrorFromParse(t *testing.T) {
	var f Frame
	data := []byte(`{"room":"lobby","message_id":7}`)
	err := ParseFrame(data, &f)
	pe, ok := err.(*Error)
	if !ok {
		t.Fatalf("ParseFrame = %v, want an *Error", err)
	}
	got := decodeObject(t, AppendError(nil, pe.Code, pe.Message, &f))
	want := map[string]any{"type": "error", "code": "invalid_message", "message": "text is required", "message_id": json.Number("7"), "room": "lobby"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("error frame %v, want %v", got, want)
	}
}

// Every encoder appends to dst without touching what is there.
func TestAppendKeepsDst(t *testing.T) {
	var f Frame
	data := []byte(`{"text":"a"}`)
	if err := ParseFrame(data, &f); err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]func([]byte) []byte{
		"chat":          func(b []byte) []byte { return AppendChat(b, "r", 1, fixedTime, &f, data) },
		"joined":        func(b []byte) []byte { return AppendJoined(b, "r", "e", 1, 1, 1, "n-1") },
		"left":          func(b []byte) []byte { return AppendLeft(b, "r", 1) },
		"presence":      func(b []byte) []byte { return AppendPresenceUsers(b, "r", 1, []UserCount{{"u", 1}}, 0) },
		"presence_join": func(b []byte) []byte { return AppendPresenceEvent(b, "r", "u", true) },
		"history_gap":   func(b []byte) []byte { return AppendHistoryGap(b, "r", 1, 1, true) },
		"error":         func(b []byte) []byte { return AppendError(b, "c", "m", &f) },
	} {
		alone := fn(nil)
		got := fn([]byte("[frame]"))
		if string(got) != "[frame]"+string(alone) {
			t.Errorf("%s: appended to a prefix gives %s", name, got)
		}
	}
}

func TestAppendChatDraftMatchesAppendChat(t *testing.T) {
	var f Frame
	data := []byte(`{"text":"hi","message_id":7,"x":[1,2]}`)
	if err := ParseFrame(data, &f); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)
	for _, seq := range []uint64{0, 1, 42, 18446744073709551615} {
		want := string(AppendChat([]byte("prefix"), "r", seq, at, &f, data))
		draft, i := AppendChatDraft([]byte("prefix"), "r", at, &f, data)
		if got := string(draft[:i]) + strconv.FormatUint(seq, 10) + string(draft[i:]); got != want {
			t.Errorf("seq %d: draft gives %s, want %s", seq, got, want)
		}
	}
}

func TestSenderOverrideReplacesTheClientsSender(t *testing.T) {
	f := Frame{SenderOverride: `alice "the" admin`}
	data := []byte(`{"text":"hi","sender":"mallory","x":1}`)
	if err := ParseFrame(data, &f); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(AppendChat(nil, "r", 1, fixedTime, &f, data), &got); err != nil {
		t.Fatal(err)
	}
	if got["sender"] != `alice "the" admin` || got["text"] != "hi" || got["x"] != float64(1) {
		t.Errorf("got %v", got)
	}
	f.SenderOverride = ""
	if err := ParseFrame(data, &f); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(AppendChat(nil, "r", 1, fixedTime, &f, data), &got); err != nil || got["sender"] != "mallory" {
		t.Errorf("without override: %v %v", got, err)
	}
}
