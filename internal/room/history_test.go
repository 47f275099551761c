package room

import (
	"fmt"
	"testing"
)

func seqs(ms []Message) string {
	s := ""
	for _, m := range ms {
		s += fmt.Sprint(m.Seq, ",")
	}
	return s
}

func TestHistory(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		add    int // messages 1..add
		since  uint64
		last   int
		wantS  string // appendSince(since)
		wantL  string // appendLast(last)
		oldest uint64
	}{
		{"disabled", 0, 5, 0, 3, "", "", 0},
		{"empty", 3, 0, 0, 3, "", "", 0},
		{"not full", 4, 3, 1, 2, "2,3,", "2,3,", 1},
		{"exactly full", 3, 3, 0, 5, "1,2,3,", "1,2,3,", 1},
		{"wrapped", 3, 7, 5, 3, "6,7,", "5,6,7,", 5},
		{"since before oldest", 3, 7, 1, 1, "5,6,7,", "7,", 5},
		{"since at end", 3, 7, 7, 0, "", "", 5},
		{"since after end", 3, 7, 9, 3, "", "5,6,7,", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistory(tt.limit, false)
			grew := 0
			for i := 1; i <= tt.add; i++ {
				if g, _ := h.add(Message{Seq: uint64(i)}); g {
					grew++
				}
			}
			if grew != min(tt.add, tt.limit) || h.n != grew {
				t.Errorf("grew %d, n %d", grew, h.n)
			}
			if got := seqs(h.appendSince(nil, tt.since)); got != tt.wantS {
				t.Errorf("since %d: %s, want %s", tt.since, got, tt.wantS)
			}
			if got := seqs(h.appendLast(nil, tt.last)); got != tt.wantL {
				t.Errorf("last %d: %s, want %s", tt.last, got, tt.wantL)
			}
			if h.oldest() != tt.oldest {
				t.Errorf("oldest %d, want %d", h.oldest(), tt.oldest)
			}
			if len(h.ring) > tt.limit {
				t.Errorf("ring grew to %d past its limit %d", len(h.ring), tt.limit)
			}
		})
	}
}

func TestHistoryDropOldestThenGrow(t *testing.T) {
	h := newHistory(5, false)
	for i := 1; i <= 3; i++ {
		h.add(Message{Seq: uint64(i), data: []byte{byte(i)}})
	}
	for i := 1; i <= 3; i++ {
		if m := h.dropOldest().message(nil); m.Seq != uint64(i) || len(m.JSON()) != 1 {
			t.Fatalf("dropOldest returned %d (%q), want %d", m.Seq, m.JSON(), i)
		}
	}
	if e := h.dropOldest(); e.seq != 0 || h.n != 0 {
		t.Fatal("dropOldest on an empty history")
	}
	for i := 4; i <= 9; i++ {
		h.add(Message{Seq: uint64(i), data: []byte{byte(i)}})
	}
	got := seqs(h.appendSince(nil, 0))
	if want := "5,6,7,8,9,"; got != want {
		t.Errorf("after drops and adds: %s, want %s", got, want)
	}
	for _, m := range h.appendLast(nil, 10) {
		if len(m.JSON()) != 1 || m.JSON()[0] != byte(m.Seq) {
			t.Errorf("empty message %d in history", m.Seq)
		}
	}
}
