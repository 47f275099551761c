package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFrame(t *testing.T) {
	deep := func(n int) string { // a member nesting n arrays inside the frame's object
		return `{"text":"x","d":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	deepObj := func(n int) string {
		return `{"text":"x","d":` + strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) + `}`
	}
	long := strings.Repeat("s", MaxSenderLen)
	tests := []struct {
		name  string
		in    string
		code  string // "" when accepted
		kind  Kind
		room  string // "" when f.Room must be nil
		id    int64  // -1 when f.HasMessageID must be false
		since int64  // -1 when f.HasSince must be false
	}{
		// Chat messages.
		{"typical", `{"message_id": 7, "text": "hello", "sender": "alice", "sent_at": "2026-11-21T10:00:00.123Z", "room": "lobby"}`, "", KindMessage, "lobby", 7, -1},
		{"text only", `{"text":"hi"}`, "", KindMessage, "", -1, -1},
		{"empty text", `{"text":""}`, "", KindMessage, "", -1, -1},
		{"whitespace everywhere", " \t\r\n{ \"text\" :\n\"hi\" , \"message_id\"\t: 0 }\r\n ", "", KindMessage, "", 0, -1},
		{"type message", `{"type":"message","text":"hi"}`, "", KindMessage, "", -1, -1},
		{"escaped type message", `{"type":"mess\u0061ge","text":"hi"}`, "", KindMessage, "", -1, -1},
		{"extra fields of every kind", `{"text":"hi","n":-1.5e+3,"b":true,"f":false,"z":null,"o":{"a":[1,{"b":[]}],"c":{}},"a":[],"s":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}`, "", KindMessage, "", -1, -1},
		{"since is an ordinary field of a chat message", `{"text":"hi","since":"x","since":[1]}`, "", KindMessage, "", -1, -1},
		{"seq and server_at dropped, may repeat", `{"text":"hi","seq":1,"seq":"x","server_at":{}}`, "", KindMessage, "", -1, -1},
		{"escaped room", `{"text":"hi","room":"lo\u0062by"}`, "", KindMessage, "lobby", -1, -1},
		{"escaped key is the known key", `{"\u0074ext":"hi"}`, "", KindMessage, "", -1, -1},
		{"sender 64 bytes", `{"text":"hi","sender":"` + long + `"}`, "", KindMessage, "", -1, -1},
		{"sender 64 bytes after unescaping", `{"text":"hi","sender":"` + strings.Repeat(`\u0041`, MaxSenderLen) + `"}`, "", KindMessage, "", -1, -1},
		{"sender 16 emoji", `{"text":"hi","sender":"` + strings.Repeat(`\ud83d\ude00`, 16) + `"}`, "", KindMessage, "", -1, -1},
		{"lone surrogate", `{"text":"\ud800 \udc00 \ud800\u0041"}`, "", KindMessage, "", -1, -1},
		{"nesting at the limit", deep(MaxDepth - 1), "", KindMessage, "", -1, -1},
		{"object nesting at the limit", deepObj(MaxDepth - 1), "", KindMessage, "", -1, -1},
		{"unknown field named like a server frame", `{"text":"hi","code":"x","members":3}`, "", KindMessage, "", -1, -1},

		// Control frames.
		{"join", `{"type":"join","room":"x"}`, "", KindJoin, "x", -1, -1},
		{"join since", `{"type":"join","room":"x","since":40}`, "", KindJoin, "x", -1, 40},
		{"join since 0", `{"room":"x","since":0,"type":"join"}`, "", KindJoin, "x", -1, 0},
		{"join with message_id", `{"type":"join","room":"x","message_id":3}`, "", KindJoin, "x", 3, -1},
		{"join ignores chat fields", `{"type":"join","room":"x","text":5,"sender":[]}`, "", KindJoin, "x", -1, -1},
		{"leave", `{"type":"leave","room":"x"}`, "", KindLeave, "x", -1, -1},
		{"presence", `{"type":"presence","room":"x"}`, "", KindPresence, "x", -1, -1},
		{"leave ignores since", `{"type":"leave","room":"x","since":-1,"since":1}`, "", KindLeave, "x", -1, -1},

		// invalid_json
		{"empty", ``, CodeInvalidJSON, 0, "", -1, -1},
		{"spaces", `   `, CodeInvalidJSON, 0, "", -1, -1},
		{"array", `[{"text":"hi"}]`, CodeInvalidJSON, 0, "", -1, -1},
		{"string", `"text"`, CodeInvalidJSON, 0, "", -1, -1},
		{"number", `42`, CodeInvalidJSON, 0, "", -1, -1},
		{"null", `null`, CodeInvalidJSON, 0, "", -1, -1},
		{"two objects", `{"text":"a"}{"text":"b"}`, CodeInvalidJSON, 0, "", -1, -1},
		{"trailing garbage", `{"text":"a"} x`, CodeInvalidJSON, 0, "", -1, -1},
		{"unclosed", `{"text":"a"`, CodeInvalidJSON, 0, "", -1, -1},
		{"unclosed string", `{"text":"a}`, CodeInvalidJSON, 0, "", -1, -1},
		{"trailing comma", `{"text":"a",}`, CodeInvalidJSON, 0, "", -1, -1},
		{"missing colon", `{"text" "a"}`, CodeInvalidJSON, 0, "", -1, -1},
		{"missing value", `{"text":}`, CodeInvalidJSON, 0, "", -1, -1},
		{"unquoted key", `{text:"a"}`, CodeInvalidJSON, 0, "", -1, -1},
		{"single quotes", `{'text':'a'}`, CodeInvalidJSON, 0, "", -1, -1},
		{"bad escape", `{"text":"\x"}`, CodeInvalidJSON, 0, "", -1, -1},
		{"short unicode escape", `{"text":"\u12"}`, CodeInvalidJSON, 0, "", -1, -1},
		{"bad hex", `{"text":"\u12g4"}`, CodeInvalidJSON, 0, "", -1, -1},
		{"raw newline in string", "{\"text\":\"a\nb\"}", CodeInvalidJSON, 0, "", -1, -1},
		{"raw nul in string", "{\"text\":\"a\x00b\"}", CodeInvalidJSON, 0, "", -1, -1},
		{"leading zero", `{"text":"a","n":01}`, CodeInvalidJSON, 0, "", -1, -1},
		{"plus sign", `{"text":"a","n":+1}`, CodeInvalidJSON, 0, "", -1, -1},
		{"bare minus", `{"text":"a","n":-}`, CodeInvalidJSON, 0, "", -1, -1},
		{"bare dot", `{"text":"a","n":1.}`, CodeInvalidJSON, 0, "", -1, -1},
		{"bare exponent", `{"text":"a","n":1e}`, CodeInvalidJSON, 0, "", -1, -1},
		{"hex number", `{"text":"a","n":0x1}`, CodeInvalidJSON, 0, "", -1, -1},
		{"NaN", `{"text":"a","n":NaN}`, CodeInvalidJSON, 0, "", -1, -1},
		{"truncated literal", `{"text":"a","b":tru}`, CodeInvalidJSON, 0, "", -1, -1},
		{"capital literal", `{"text":"a","b":True}`, CodeInvalidJSON, 0, "", -1, -1},
		{"nested trailing comma", `{"text":"a","o":[1,]}`, CodeInvalidJSON, 0, "", -1, -1},
		{"nested mismatched brackets", `{"text":"a","o":[1}}`, CodeInvalidJSON, 0, "", -1, -1},
		{"nested missing colon", `{"text":"a","o":{"k" 1}}`, CodeInvalidJSON, 0, "", -1, -1},
		{"nested non-string key", `{"text":"a","o":{1:1}}`, CodeInvalidJSON, 0, "", -1, -1},
		{"nested unclosed", `{"text":"a","o":[[`, CodeInvalidJSON, 0, "", -1, -1},
		{"invalid json wins over a semantic error", `{"type":"nope","room":"!",}`, CodeInvalidJSON, 0, "", -1, -1},
		{"comment", `{"text":"a"/*c*/}`, CodeInvalidJSON, 0, "", -1, -1},

		// invalid_message
		{"no text", `{"message_id":7,"room":"lobby"}`, CodeInvalidMessage, KindMessage, "lobby", 7, -1},
		{"empty object", `{}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"text number", `{"text":5}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"text null", `{"text":null}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"text array", `{"text":["a"]}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"message_id string", `{"text":"a","message_id":"7"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"message_id negative", `{"text":"a","message_id":-1}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"message_id minus zero", `{"text":"a","message_id":-0}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"message_id fraction", `{"text":"a","message_id":1.0}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"message_id exponent", `{"text":"a","message_id":1e3}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"message_id 2^64", `{"text":"a","message_id":18446744073709551616}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"message_id huge", `{"text":"a","message_id":99999999999999999999999}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"message_id null", `{"text":"a","message_id":null}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sender 65 bytes", `{"text":"a","sender":"` + long + `s"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sender 65 bytes after unescaping", `{"text":"a","sender":"` + long + `\u00e9"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sender number", `{"text":"a","sender":1}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		// A sender follows the user name rule (docs/api.md#who-a-user-is).
		{"sender with a bidi override", `{"text":"a","sender":"ann\u202e"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sender with a bidi override, raw", "{\"text\":\"a\",\"sender\":\"ann\u202e\"}", CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sender with a bell", `{"text":"a","sender":"ann\u0007"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sender with DEL", "{\"text\":\"a\",\"sender\":\"ann\x7f\"}", CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sender with a space at its end", `{"text":"a","sender":"ann "}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sender with a new line", `{"text":"a","sender":"a\nb"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"sent_at number", `{"text":"a","sent_at":1}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"duplicate text", `{"text":"a","text":"b"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"duplicate text, escaped", `{"text":"a","t\u0065xt":"b"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"duplicate message_id", `{"text":"a","message_id":1,"message_id":1}`, CodeInvalidMessage, KindMessage, "", 1, -1},
		{"duplicate room", `{"text":"a","room":"x","room":"x"}`, CodeInvalidMessage, KindMessage, "x", -1, -1},
		{"duplicate sender", `{"text":"a","sender":"x","sender":"y"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"duplicate sent_at", `{"text":"a","sent_at":"x","sent_at":"y"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"duplicate type", `{"type":"join","type":"join","room":"x"}`, CodeInvalidMessage, KindMessage, "x", -1, -1},
		{"type number", `{"type":1,"text":"a"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"type null", `{"type":null,"text":"a"}`, CodeInvalidMessage, KindMessage, "", -1, -1},
		{"too deep", deep(MaxDepth), CodeInvalidMessage, KindMessage, "", -1, -1},
		{"too deep objects", deepObj(MaxDepth), CodeInvalidMessage, KindMessage, "", -1, -1},
		{"join without room", `{"type":"join"}`, CodeInvalidMessage, KindJoin, "", -1, -1},
		{"leave without room", `{"type":"leave","message_id":4}`, CodeInvalidMessage, KindLeave, "", 4, -1},
		{"presence without room", `{"type":"presence"}`, CodeInvalidMessage, KindPresence, "", -1, -1},
		{"join since string", `{"type":"join","room":"x","since":"40"}`, CodeInvalidMessage, KindJoin, "x", -1, -1},
		{"join since negative", `{"type":"join","room":"x","since":-1}`, CodeInvalidMessage, KindJoin, "x", -1, -1},
		{"join since fraction", `{"type":"join","room":"x","since":4.5}`, CodeInvalidMessage, KindJoin, "x", -1, -1},
		{"join since 2^64", `{"type":"join","room":"x","since":18446744073709551616}`, CodeInvalidMessage, KindJoin, "x", -1, -1},
		{"join duplicate since", `{"type":"join","room":"x","since":1,"since":2}`, CodeInvalidMessage, KindJoin, "x", -1, -1},
		{"join bad message_id", `{"type":"join","room":"x","message_id":"a"}`, CodeInvalidMessage, KindJoin, "x", -1, -1},

		// unknown_type
		{"unknown type", `{"type":"shout","text":"a","message_id":9}`, CodeUnknownType, KindMessage, "", 9, -1},
		{"empty type", `{"type":"","text":"a"}`, CodeUnknownType, KindMessage, "", -1, -1},
		{"type case", `{"type":"JOIN","room":"x"}`, CodeUnknownType, KindMessage, "x", -1, -1},
		{"long type", `{"type":"presence-and-more","room":"x"}`, CodeUnknownType, KindMessage, "x", -1, -1},
		{"server type", `{"type":"joined","room":"x"}`, CodeUnknownType, KindMessage, "x", -1, -1},
		{"unknown type wins over a bad room", `{"type":"shout","room":"a b"}`, CodeUnknownType, KindMessage, "", -1, -1},

		// invalid_room
		{"room with space", `{"text":"a","room":"a b","message_id":1}`, CodeInvalidRoom, KindMessage, "", 1, -1},
		{"room empty", `{"text":"a","room":""}`, CodeInvalidRoom, KindMessage, "", -1, -1},
		{"room too long", `{"text":"a","room":"` + strings.Repeat("r", MaxRoomLen+1) + `"}`, CodeInvalidRoom, KindMessage, "", -1, -1},
		{"room too long escaped", `{"text":"a","room":"` + strings.Repeat(`\u0072`, MaxRoomLen+1) + `"}`, CodeInvalidRoom, KindMessage, "", -1, -1},
		{"room escaped slash", `{"text":"a","room":"a\/b"}`, CodeInvalidRoom, KindMessage, "", -1, -1},
		{"room escaped quote", `{"text":"a","room":"a\"b"}`, CodeInvalidRoom, KindMessage, "", -1, -1},
		{"room non-ASCII", `{"text":"a","room":"café"}`, CodeInvalidRoom, KindMessage, "", -1, -1},
		{"room number", `{"text":"a","room":5}`, CodeInvalidRoom, KindMessage, "", -1, -1},
		{"room null", `{"text":"a","room":null}`, CodeInvalidRoom, KindMessage, "", -1, -1},
		{"join bad room", `{"type":"join","room":"#x"}`, CodeInvalidRoom, KindJoin, "", -1, -1},
		{"bad room wins over no text", `{"room":"#x"}`, CodeInvalidRoom, KindMessage, "", -1, -1},
	}
	var f Frame
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ParseFrame([]byte(tt.in), &f)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("ParseFrame(%s) = %v, want nil", tt.in, err)
				}
			} else {
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("ParseFrame(%s) = %v, want an *Error with code %s", tt.in, err, tt.code)
				}
				if pe.Code != tt.code {
					t.Fatalf("ParseFrame(%s) code = %s (%s), want %s", tt.in, pe.Code, pe.Message, tt.code)
				}
				if pe.Message == "" || strings.Contains(pe.Message, "\n") {
					t.Errorf("message %q is not one line of text", pe.Message)
				}
				if tt.code == CodeInvalidJSON {
					if f.Room != nil || f.HasMessageID {
						t.Errorf("invalid JSON left room %q, message_id %v", f.Room, f.HasMessageID)
					}
					return
				}
			}
			if f.Kind != tt.kind {
				t.Errorf("Kind = %v, want %v", f.Kind, tt.kind)
			}
			if tt.room == "" && f.Room != nil {
				t.Errorf("Room = %q, want nil", f.Room)
			} else if string(f.Room) != tt.room {
				t.Errorf("Room = %q, want %q", f.Room, tt.room)
			}
			if tt.id >= 0 && (!f.HasMessageID || f.MessageID != uint64(tt.id)) {
				t.Errorf("message_id = %v %d, want %d", f.HasMessageID, f.MessageID, tt.id)
			}
			if tt.id < 0 && f.HasMessageID {
				t.Errorf("message_id = %d, want none", f.MessageID)
			}
			if tt.since >= 0 && (!f.HasSince || f.Since != uint64(tt.since)) {
				t.Errorf("since = %v %d, want %d", f.HasSince, f.Since, tt.since)
			}
			if tt.since < 0 && f.HasSince {
				t.Errorf("since = %d, want none", f.Since)
			}
		})
	}
}

func TestParseFrameMaxMessageID(t *testing.T) {
	var f Frame
	if err := ParseFrame([]byte(`{"text":"a","message_id":18446744073709551615}`), &f); err != nil {
		t.Fatal(err)
	}
	if !f.HasMessageID || f.MessageID != 1<<64-1 {
		t.Fatalf("message_id = %v %d, want 2^64-1", f.HasMessageID, f.MessageID)
	}
}

// A Frame is reused between calls: nothing of the previous frame may
// survive into the next.
func TestParseFrameReuse(t *testing.T) {
	var f Frame
	if err := ParseFrame([]byte(`{"type":"join","room":"x","since":3,"message_id":1}`), &f); err != nil {
		t.Fatal(err)
	}
	if err := ParseFrame([]byte(`{"text":"a"}`), &f); err != nil {
		t.Fatal(err)
	}
	if f.Kind != KindMessage || f.Room != nil || f.HasSince || f.Since != 0 || f.HasMessageID || f.MessageID != 0 {
		t.Fatalf("state left over from the previous frame: %+v", f)
	}
	got := AppendChat(nil, "r", 1, fixedTime, &f, []byte(`{"text":"a"}`))
	if want := `{"room":"r","seq":1,"server_at":"2026-11-21T10:00:00.124031Z","text":"a"}`; string(got) != want {
		t.Fatalf("AppendChat = %s, want %s", got, want)
	}
}

// The refusals are preallocated: the same value comes back every time.
func TestParseFrameErrorsPreallocated(t *testing.T) {
	var f Frame
	for _, in := range []string{`{`, `{}`, `{"type":"x"}`, `{"room":"#","text":"a"}`} {
		e1 := ParseFrame([]byte(in), &f)
		e2 := ParseFrame([]byte(in), &f)
		if e1 == nil || e1 != e2 {
			t.Errorf("ParseFrame(%s) returned %p then %p", in, e1, e2)
		}
	}
}

func TestErrorString(t *testing.T) {
	e := &Error{Code: CodeInvalidJSON, Message: "the frame is not valid JSON"}
	if got, want := e.Error(), "protocol: invalid_json: the frame is not valid JSON"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindMessage: "message", KindJoin: "join", KindLeave: "leave", KindPresence: "presence", 99: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
