package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseFrame cross-checks ParseFrame and AppendChat with encoding/json:
// ParseFrame calls a frame invalid JSON exactly when json.Valid does (or the
// frame is not an object), refuses and accepts what a reference built on
// encoding/json refuses and accepts, and the broadcast of an accepted chat
// message is valid JSON holding the client's fields.
//
// CI: go test -run '^$' -fuzz '^FuzzParseFrame$' -fuzztime 30s ./internal/protocol
func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{
		`{"message_id": 7, "text": "hello", "sender": "alice", "sent_at": "2026-11-21T10:00:00.123Z", "room": "lobby"}`,
		`{"type":"join","room":"x","since":40}`,
		`{"type":"leave","room":"x"}`,
		`{"type":"presence","room":"x"}`,
		`{"type":"message","text":"a","seq":1,"server_at":"x","o":{"a":[1,2.5e-3,true,null,"\ud83d\ude00"]}}`,
		`{"text":"a","text":"b"}`,
		`{"\u0074ext":"a","ro\u006fm":"lo\u0062by"}`,
		`{"text":"a","message_id":18446744073709551616}`,
		`{"text":"a","d":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		`{"text":1}`,
		`[]`,
		`{"text":"a",}`,
	} {
		f.Add([]byte(s))
	}
	var fr Frame
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		err := ParseFrame(data, &fr)
		if !bytes.Equal(data, orig) {
			t.Fatal("ParseFrame modified its input")
		}
		var pe *Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("error %v is not an *Error", err)
		}
		object := json.Valid(data) && data[skipSpace(data, 0)] == '{'
		deep := nestingDepth(data) > MaxDepth
		switch {
		case err == errTooDeep:
			if !deep {
				t.Fatalf("%q: refused as too deep, nesting %d", data, nestingDepth(data))
			}
			return
		case pe != nil && pe.Code == CodeInvalidJSON:
			if object {
				t.Fatalf("%q: json.Valid accepts it, ParseFrame says %v", data, err)
			}
			return
		case !object:
			t.Fatalf("%q: not a valid JSON object, ParseFrame says %v", data, err)
		case deep:
			t.Fatalf("%q: nesting %d accepted", data, nestingDepth(data))
		}

		// The frame is a JSON object. encoding/json replaces invalid
		// UTF-8, which the WebSocket layer never lets through: compare
		// meanings only for UTF-8 frames.
		if !utf8.Valid(data) {
			return
		}
		want := referenceParse(t, data)
		code := ""
		if pe != nil {
			code = pe.Code
		}
		if code != want.code {
			t.Fatalf("%s: code %q (%v), reference %q", data, code, err, want.code)
		}
		if string(fr.Room) != want.room || (fr.Room == nil) != (want.room == "") {
			t.Fatalf("%s: room %q, reference %q", data, fr.Room, want.room)
		}
		if fr.HasMessageID != want.hasID || fr.MessageID != want.id {
			t.Fatalf("%s: message_id %v %d, reference %v %d", data, fr.HasMessageID, fr.MessageID, want.hasID, want.id)
		}
		if err != nil {
			decodeObject(t, AppendError(nil, pe.Code, pe.Message, &fr))
			return
		}
		if fr.Kind != want.kind || fr.HasSince != want.hasSince || fr.Since != want.since {
			t.Fatalf("%s: kind %v since %v %d, reference %v %v %d", data, fr.Kind, fr.HasSince, fr.Since, want.kind, want.hasSince, want.since)
		}
		if fr.Kind == KindMessage {
			at := time.Unix(1<<31, 123456789)
			out := AppendChat(nil, "room-1", 1<<63, at, &fr, data)
			checkChat(t, data, out, "room-1", 1<<63, at)
		}
	})
}

// nestingDepth returns the deepest nesting of objects and arrays in the
// JSON text b, as far as it can be told when b is not valid.
func nestingDepth(b []byte) int {
	depth, max := 0, 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			max = maxInt(max, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return max
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

type reference struct {
	code            string
	kind            Kind
	room            string
	hasID, hasSince bool
	id, since       uint64
}

// referenceParse applies the rules of docs/protocol.md to the valid JSON
// object data with encoding/json, in the order ParseFrame documents.
func referenceParse(t *testing.T, data []byte) reference {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	if _, err := d.Token(); err != nil {
		t.Fatal(err)
	}
	last := map[string]json.RawMessage{}
	count := map[string]int{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		last[k] = v
		count[k]++
	}
	str := func(k string) (string, bool) {
		v, ok := last[k]
		if !ok || v[0] != '"' {
			return "", false
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			t.Fatal(err)
		}
		return s, true
	}
	uint := func(k string) (uint64, bool) {
		v := last[k]
		for _, c := range v {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return 0, false
		}
		return n, true
	}

	var r reference
	roomCode := ""
	if _, ok := last["room"]; ok {
		if s, ok := str("room"); ok && ValidRoomString(s) {
			r.room = s
		} else {
			roomCode = CodeInvalidRoom
		}
	}
	idCode := ""
	if _, ok := last["message_id"]; ok {
		if r.id, r.hasID = uint("message_id"); !r.hasID {
			idCode = CodeInvalidMessage
		}
	}
	known := []string{"type", "room", "message_id", "text", "sender", "sent_at"}
	if _, ok := last["type"]; ok {
		if count["type"] > 1 {
			r.code = CodeInvalidMessage
			return r
		}
		s, ok := str("type")
		if !ok {
			r.code = CodeInvalidMessage
			return r
		}
		switch s {
		case "message":
		case "join":
			r.kind, known = KindJoin, []string{"type", "room", "message_id", "since"}
		case "leave", "presence":
			r.kind, known = KindLeave, []string{"type", "room", "message_id"}
			if s == "presence" {
				r.kind = KindPresence
			}
		default:
			r.code = CodeUnknownType
			return r
		}
	}
	for _, k := range known {
		if count[k] > 1 {
			r.code = CodeInvalidMessage
			return r
		}
	}
	if r.code = roomCode; r.code != "" {
		return r
	}
	if r.code = idCode; r.code != "" {
		return r
	}
	if r.kind != KindMessage {
		if _, ok := last["room"]; !ok {
			r.code = CodeInvalidMessage
		}
		if _, ok := last["since"]; ok && r.kind == KindJoin && r.code == "" {
			if r.since, r.hasSince = uint("since"); !r.hasSince {
				r.code = CodeInvalidMessage
			}
		}
		return r
	}
	if _, ok := str("text"); !ok {
		r.code = CodeInvalidMessage
	}
	if _, ok := last["sender"]; ok && r.code == "" {
		if s, ok := str("sender"); !ok || len(s) > MaxSenderLen || !ValidUser(s) {
			r.code = CodeInvalidMessage
		}
	}
	if _, ok := last["sent_at"]; ok && r.code == "" {
		if _, ok := str("sent_at"); !ok {
			r.code = CodeInvalidMessage
		}
	}
	return r
}
