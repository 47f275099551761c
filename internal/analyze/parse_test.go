package analyze

import (
	"errors"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

func TestParseRow(t *testing.T) {
	tests := []struct {
		line string
		want Row
		err  error
	}{
		{line: "s1,r0,,,0,Joined,1763719200000000,", want: Row{Kind: results.Joined, Client: 0, UnixUS: 1763719200000000}},
		{line: "s1,r0,1,0,0,Sent,1763719201000000,41", want: Row{Kind: results.Sent, Message: 1, Sender: 0, Client: 0, UnixUS: 1763719201000000, LagUS: 41, HasLag: true}},
		{line: "s1,r0,1,0,0,Sent,1763719201000000,-3", want: Row{Kind: results.Sent, Message: 1, UnixUS: 1763719201000000, LagUS: -3, HasLag: true}},
		{line: "s1,r0,1,7,12,Received,1763719201000412,", want: Row{Kind: results.Received, Message: 1, Sender: 7, Client: 12, UnixUS: 1763719201000412}},
		{line: "s1,r0,1,7,12,Received,1763719201000412,\r", want: Row{Kind: results.Received, Message: 1, Sender: 7, Client: 12, UnixUS: 1763719201000412}},
		{line: "step-10,room.a_b-C,18446744073709551615,2,3,Received,5,", want: Row{Kind: results.Received, Message: 1<<64 - 1, Sender: 2, Client: 3, UnixUS: 5}},
		{line: "", err: errFields},
		{line: "s1", err: errFields},
		{line: ",r0,1,0,0,Sent,1,", err: errStep},
		{line: "s1,,1,0,0,Sent,1,", err: errRoom},
		{line: "s1,r 0,1,0,0,Sent,1,", err: errRoom},
		{line: "s1,r0,x,0,0,Sent,1,", err: errMessageID},
		{line: "s1,r0,18446744073709551616,0,0,Sent,1,", err: errMessageID},
		{line: "s1,r0,1,-1,0,Sent,1,", err: errSenderID},
		{line: "s1,r0,1,0,,Sent,1,", err: errClientID},
		{line: "s1,r0,1,0,0,Left,1,", err: errEvent},
		{line: "s1,r0,1,0,0,Sent", err: errFields},
		{line: "s1,r0,1,0,0,Sent,", err: errFields},
		{line: "s1,r0,1,0,0,Sent,,", err: errUnixUS},
		{line: "s1,r0,1,0,0,Sent,9223372036854775808,", err: errUnixUS},
		{line: "s1,r0,1,0,0,Sent,12", err: errFields},
		{line: "s1,r0,1,0,0,Sent,12,4x", err: errLagUS},
		{line: "s1,r0,1,0,0,Sent,12,4,", err: errFields},
		{line: "s1,r0,1,0,0,Received,1763719", err: errFields}, // a truncated row
		{line: "s1,r0,,0,0,Received,1,", err: errEmptyField},
		{line: "s1,r0,1,,0,Sent,1,", err: errEmptyField},
		{line: results.EventsHeader, err: errMessageID},
	}
	for _, tt := range tests {
		var r Row
		err := ParseRow([]byte(tt.line), &r)
		if !errors.Is(err, tt.err) {
			t.Errorf("ParseRow(%q) error = %v, want %v", tt.line, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		if !sameRow(r, tt.want) {
			t.Errorf("ParseRow(%q) = %+v, want %+v", tt.line, r, tt.want)
		}
	}
}

func TestParseRowNames(t *testing.T) {
	var r Row
	if err := ParseRow([]byte("step-2,room-7,1,2,3,Sent,4,5"), &r); err != nil {
		t.Fatal(err)
	}
	if string(r.Step) != "step-2" || string(r.Room) != "room-7" || string(r.StepRoom) != "step-2,room-7" {
		t.Errorf("names = %q %q %q", r.Step, r.Room, r.StepRoom)
	}
}

func TestParseOldRow(t *testing.T) {
	tests := []struct {
		line string
		want Row
		err  error
	}{
		{line: "1,0,0,Sent,1763719201000000", want: Row{Kind: results.Sent, Message: 1, UnixUS: 1763719201000000}},
		{line: "1,0,5,Received,1763719201000380\r", want: Row{Kind: results.Received, Message: 1, Client: 5, UnixUS: 1763719201000380}},
		{line: "1,0,5,Received,1763719201000380,", err: errFields},
		{line: "1,0,5,Joined,1", err: errOldJoined},
		{line: "1,0,5,Received", err: errFields},
		{line: "1,0,5", err: errFields},
		{line: ",0,5,Sent,1", err: errMessageID},
		{line: "1,0,5,Sent,", err: errUnixUS},
		{line: "1,0,5,Sent,1x", err: errUnixUS},
		// The original client's ids: UUID strings, or any text.
		{line: "1,022ab76b-34ce-41ed-8acd-4dcb4807c3c1,3bb67e68-e26f-49c8-93fd-5df1afd7eda9,Received,1795238808000695",
			want: Row{Kind: results.Received, Message: 1, Sender: hashID([]byte("022ab76b-34ce-41ed-8acd-4dcb4807c3c1")),
				Client: hashID([]byte("3bb67e68-e26f-49c8-93fd-5df1afd7eda9")), UnixUS: 1795238808000695}},
		{line: "2,alice,bob,Sent,5", want: Row{Kind: results.Sent, Message: 2, Sender: hashID([]byte("alice")), Client: hashID([]byte("bob")), UnixUS: 5}},
		{line: "0,,3bb67e68-e26f-49c8-93fd-5df1afd7eda9,Received,1795238808000695", err: ErrIgnored},
		{line: "4,,bob,Received,5", err: errSenderID},
		{line: "4,alice,,Received,5", err: errClientID},
		{line: "4,alice", err: errFields},
		{line: "x1,alice,bob,Sent,5", err: errMessageID},
	}
	for _, tt := range tests {
		var r Row
		err := ParseOldRow([]byte(tt.line), &r)
		if !errors.Is(err, tt.err) {
			t.Errorf("ParseOldRow(%q) error = %v, want %v", tt.line, err, tt.err)
			continue
		}
		if err == nil && !sameRow(r, tt.want) {
			t.Errorf("ParseOldRow(%q) = %+v, want %+v", tt.line, r, tt.want)
		}
	}
}

// sameRow compares the parsed values, not the name slices.
func sameRow(a, b Row) bool {
	return a.Kind == b.Kind && a.Message == b.Message && a.Sender == b.Sender && a.Client == b.Client &&
		a.UnixUS == b.UnixUS && a.LagUS == b.LagUS && a.HasLag == b.HasLag
}

// The fast parser reads what the results package writes, field for field.
func TestParseRowReadsResultsRows(t *testing.T) {
	for _, e := range []results.Event{
		{Step: "s1", Room: "p-s1-r3", Kind: results.Sent, MessageID: 7, SenderID: 2, ClientID: 2, UnixUS: 1763719201000000, LagUS: 41},
		{Step: "s1", Room: "p-s1-r3", Kind: results.Joined, ClientID: 5, UnixUS: 1763719200000000, LagUS: -1},
		{Step: "s1", Room: "p-s1-r3", Kind: results.Received, MessageID: 1<<32 - 1, SenderID: 1 << 40, ClientID: 9, UnixUS: 1763719201000380, LagUS: -1},
	} {
		line := results.AppendEvent(nil, &e)
		var r Row
		if err := ParseRow(line[:len(line)-1], &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if r.Kind != e.Kind || string(r.Step) != e.Step || string(r.Room) != e.Room || r.Message != e.MessageID ||
			r.Sender != e.SenderID || r.Client != e.ClientID || r.UnixUS != e.UnixUS || r.HasLag != (e.LagUS >= 0) {
			t.Errorf("%q parsed as %+v", line, r)
		}
	}
}

func TestHashID(t *testing.T) {
	a, b := hashID([]byte("022ab76b-34ce-41ed-8acd-4dcb4807c3c1")), hashID([]byte("022ab76b-34ce-41ed-8acd-4dcb4807c3c2"))
	if a == b || a>>63 != 1 || hashID([]byte("alice")) == hashID([]byte("alicf")) || hashID(nil) == hashID([]byte{0}) {
		t.Errorf("hashID mixes too little: %x %x", a, b)
	}
}
