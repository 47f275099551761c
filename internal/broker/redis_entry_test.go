package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// stored returns the messages of the room's stream in Redis, in seq order.
func (n *node) stored(t testing.TB, room string) []Entry {
	t.Helper()
	es, err := n.b.rdb.XRange(context.Background(), n.b.historyKey(room), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	return streamEntries(es)
}

func TestRunValueRoundTrip(t *testing.T) {
	for _, msgs := range [][][]byte{
		{[]byte(`{"a":1}`)},
		{[]byte(`{"a":1}`), []byte(""), []byte("12:34"), []byte(`{"b":"\u00e9"}`)},
	} {
		got, ok := splitRun(runValue(msgs))
		if !ok || !slices.EqualFunc(got, msgs, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("splitRun(runValue(%q)) = %q, %v", msgs, got, ok)
		}
	}
}

func TestAppendEntry(t *testing.T) {
	run := string(runValue([][]byte{[]byte("x"), []byte("yy"), []byte("zzz")}))
	for _, tc := range []struct {
		name string
		e    redis.XMessage
		want []Entry
	}{
		{"one message", redis.XMessage{ID: "7-1", Values: map[string]any{"m": "a"}}, []Entry{{Seq: 7, Payload: []byte("a")}}},
		{"a run ending at its id", redis.XMessage{ID: "9-1", Values: map[string]any{"ms": run}},
			[]Entry{{Seq: 7, Payload: []byte("x")}, {Seq: 8, Payload: []byte("yy")}, {Seq: 9, Payload: []byte("zzz")}}},
		{"a run longer than its seqs", redis.XMessage{ID: "2-1", Values: map[string]any{"ms": run}}, nil},
		{"cut mid-message", redis.XMessage{ID: "9-1", Values: map[string]any{"ms": run[:len(run)-1]}}, nil},
		{"no length", redis.XMessage{ID: "9-1", Values: map[string]any{"ms": ":x"}}, nil},
		{"a length past the end", redis.XMessage{ID: "9-1", Values: map[string]any{"ms": "5:x"}}, nil},
		{"an empty run", redis.XMessage{ID: "9-1", Values: map[string]any{"ms": ""}}, nil},
		{"no field of ours", redis.XMessage{ID: "9-1", Values: map[string]any{"x": "a"}}, nil},
		{"no seq", redis.XMessage{ID: "abc", Values: map[string]any{"m": "a"}}, nil},
		{"seq 0", redis.XMessage{ID: "0-1", Values: map[string]any{"m": "a"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := appendEntry(nil, tc.e)
			if show(got) != show(tc.want) {
				t.Errorf("appendEntry = %s, want %s", show(got), show(tc.want))
			}
		})
	}
}

func TestLatestKeepsTheNewest(t *testing.T) {
	run := string(runValue([][]byte{[]byte("b"), []byte("c"), []byte("d")}))
	newestFirst := []redis.XMessage{
		{ID: "5-1", Values: map[string]any{"m": "e"}},
		{ID: "4-1", Values: map[string]any{"ms": run}},
	}
	got := latest(newestFirst, 3)
	if show(got) != "3:c 4:d 5:e" {
		t.Errorf("latest = %s, want 3:c 4:d 5:e", show(got))
	}
}

// show writes es as "seq:payload" words.
func show(es []Entry) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s", e.Seq, e.Payload)
	}
	return b.String()
}

// TestStreamEntriesSkipWhatTheyHave: after a follower's fill.lua wrote
// messages 4 to 6 one entry each, the owner's run of 4..7 (its write of a
// round, written since its last, 7, is new) holds 4 to 6 again; readers
// give each seq once, oldest first or newest first.
func TestStreamEntriesSkipWhatTheyHave(t *testing.T) {
	run := string(runValue([][]byte{[]byte("d"), []byte("e"), []byte("f"), []byte("g")}))
	oldestFirst := []redis.XMessage{
		{ID: "3-1", Values: map[string]any{"m": "c"}},
		{ID: "4-1", Values: map[string]any{"m": "d"}},
		{ID: "5-1", Values: map[string]any{"m": "e"}},
		{ID: "6-1", Values: map[string]any{"m": "f"}},
		{ID: "7-1", Values: map[string]any{"ms": run}},
		{ID: "8-1", Values: map[string]any{"m": "h"}},
	}
	if got := show(streamEntries(oldestFirst)); got != "3:c 4:d 5:e 6:f 7:g 8:h" {
		t.Errorf("streamEntries = %s, want 3:c 4:d 5:e 6:f 7:g 8:h", got)
	}
	newestFirst := slices.Clone(oldestFirst)
	slices.Reverse(newestFirst)
	if got := show(latest(newestFirst, 4)); got != "5:e 6:f 7:g 8:h" {
		t.Errorf("latest = %s, want 5:e 6:f 7:g 8:h", got)
	}
}
