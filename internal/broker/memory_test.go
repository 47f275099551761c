package broker

import (
	"context"
	"fmt"
	"testing"
)

func TestMemory(t *testing.T) {
	h := newFakeRooms()
	m := NewMemory(h)
	h.open("a")
	m.Subscribe("a")
	if seq, loaded := h.Seq("a"); !loaded || seq != 0 {
		t.Fatalf("after Subscribe: seq %d loaded %v, want a new room loaded at once", seq, loaded)
	}
	for _, tt := range []struct {
		prefix, suffix string
		want           string
	}{
		{`{"seq":`, `,"text":"hi"}`, `1:{"seq":1,"text":"hi"}`},
		{`{"seq":`, `}`, `2:{"seq":2}`},
	} {
		// The caller's buffers are reused at once: Publish must be done with them.
		prefix, suffix := []byte(tt.prefix), []byte(tt.suffix)
		m.Publish(Publication{Room: "a", Prefix: prefix, Suffix: suffix, From: 0})
		clear(prefix)
		clear(suffix)
		if got := h.payloads("a"); got[len(got)-1] != tt.want {
			t.Errorf("after publishing %s…%s the room holds %q, want it to end with %q", tt.prefix, tt.suffix, got, tt.want)
		}
	}
	if s := m.Stats(); !s.Up || s.Published != 0 || s.Rooms != 1 || !s.InStep {
		t.Errorf("stats %+v", s)
	}
	m.Unsubscribe("a")
	if s := m.Stats(); s.Rooms != 0 {
		t.Errorf("rooms after Unsubscribe = %d", s.Rooms)
	}
}

func TestMemoryRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- NewMemory(newFakeRooms()).Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestMemoryOrderUnderConcurrency(t *testing.T) {
	h := newFakeRooms()
	m := NewMemory(h)
	h.open("r")
	m.Subscribe("r")
	const writers, each = 4, 250
	done := make(chan struct{})
	for range writers {
		go func() {
			for range each {
				m.Publish(Publication{Room: "r", Prefix: []byte("m"), From: -1})
			}
			done <- struct{}{}
		}()
	}
	for range writers {
		<-done
	}
	got := h.payloads("r")
	if len(got) != writers*each {
		t.Fatalf("%d messages, want %d", len(got), writers*each)
	}
	for i, g := range got {
		if want := fmt.Sprintf("%d:m%d", i+1, i+1); g != want {
			t.Fatalf("message %d is %q, want %q: one room, one gapless order", i, g, want)
		}
	}
}
