//go:build linux

package terminal

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/client"
	"github.com/scalechat/scalechat/internal/server/servertest"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// lines is an io.Writer that hands over each complete line as it comes.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	all  []string
	next chan string
}

func newLines() *lines { return &lines{next: make(chan string, 1000)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // incomplete: keep for later
			return len(p), nil
		}
		line = strings.TrimSuffix(line, "\n")
		l.all = append(l.all, line)
		l.next <- line
	}
}

// wait returns the first line, from now on, that contains s.
func (l *lines) wait(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line := <-l.next:
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout:
			t.Fatalf("no line with %q within 10s; got %q", s, l.lines())
		}
	}
}

func (l *lines) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...)
}

var fast = client.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}

// session runs Run in the background with a pipe as input.
type session struct {
	in       *io.PipeWriter
	out, err *lines
	done     chan error
}

func start(t *testing.T, o Options) *session {
	t.Helper()
	r, w := io.Pipe()
	s := &session{in: w, out: newLines(), err: newLines(), done: make(chan error, 1)}
	o.In, o.Out, o.Err, o.Location, o.Backoff = r, s.out, s.err, time.UTC, fast
	ctx, cancel := context.WithCancel(context.Background())
	go func() { s.done <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		w.Close()
		s.wait(t)
	})
	return s
}

func (s *session) write(t *testing.T, text string) {
	t.Helper()
	if _, err := io.WriteString(s.in, text); err != nil {
		t.Fatal(err)
	}
}

func (s *session) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s")
	}
	return nil
}

var lineRE = regexp.MustCompile(`^\[\d\d:\d\d:\d\d\] (\S+): (.*)$`)

func TestPromptsAndPipedLines(t *testing.T) {
	srv := servertest.Start(t, nil)
	watcher, err := client.Dial(context.Background(), client.Config{URL: srv.URL("/ws"), Room: "room1"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	for ev := range watcher.Events() { // in the room before alice comes
		if s, ok := ev.(*client.State); ok && s.State == client.Connected {
			break
		}
	}

	s := start(t, Options{URL: srv.URL("/ws")})
	s.write(t, "alice\nroom1\nhello\n\n   \nsecond line\n")
	s.in.Close()
	if err := s.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := s.out.lines()
	if len(out) != 2 {
		t.Fatalf("output %q, want 2 lines", out)
	}
	for i, want := range []string{"hello", "second line"} {
		m := lineRE.FindStringSubmatch(out[i])
		if m == nil || m[1] != "alice" || m[2] != want {
			t.Errorf("line %d: %q", i, out[i])
		}
	}
	errs := strings.Join(s.err.lines(), "\n")
	for _, want := range []string{"Your name: Room [lobby]: connecting to " + srv.URL("/ws/room1") + " as alice", "joined room1: 2 members, 0 messages of history", "connected"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	// The room got both lines from alice, and nothing else.
	var got []string
	for len(got) < 2 {
		select {
		case ev := <-watcher.Events():
			if m, ok := ev.(*client.Message); ok {
				got = append(got, m.Sender+": "+m.Text)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watcher got %q", got)
		}
	}
	if strings.Join(got, "|") != "alice: hello|alice: second line" {
		t.Errorf("watcher got %q", got)
	}
}

func TestBadInput(t *testing.T) {
	srv := servertest.Start(t, nil)
	tests := []struct {
		name  string
		o     Options
		input string
		want  string
	}{
		{"no name", Options{}, "", "no name given"},
		{"empty name", Options{}, "\nroom\n", "name must not be empty"},
		{"long name", Options{Name: strings.Repeat("n", 65)}, "", "at most 64 bytes"},
		{"a bidi override in the name", Options{Name: "\u202eann"}, "", "not valid"},
		{"no room", Options{}, "alice\n", "no room given"},
		{"bad room", Options{Name: "a"}, "bad room!\n", `room "bad room!": room names are`},
		{"bad url", Options{Name: "a", Room: "r", URL: "localhost:8080"}, "", "want a ws://"},
		{"no server", Options{Name: "a", Room: "r", URL: "ws://127.0.0.1:1/ws"}, "", "cannot connect to ws://127.0.0.1:1/ws/r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.o.URL == "" {
				tt.o.URL = srv.URL("/ws")
			}
			tt.o.In = strings.NewReader(tt.input)
			err := Run(context.Background(), tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLongLinesAreRefused(t *testing.T) {
	srv := servertest.Start(t, nil)
	s := start(t, Options{URL: srv.URL("/ws"), Name: "a", Room: "r", MaxLine: 10})
	s.write(t, "0123456789A\nshort\n")
	s.in.Close()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
	if out := s.out.lines(); len(out) != 1 || !strings.HasSuffix(out[0], "] a: short") {
		t.Errorf("output %q", out)
	}
	if errs := strings.Join(s.err.lines(), "\n"); !strings.Contains(errs, "line of 11 bytes not sent: at most 10 bytes") {
		t.Errorf("stderr:\n%s", errs)
	}
}

func TestQuitLeavesAndHistoryIsPrinted(t *testing.T) {
	srv := servertest.Start(t, nil)
	first := start(t, Options{URL: srv.URL("/ws"), Name: "ann", Room: "r"})
	first.write(t, "one\ntwo\n/quit\nnever sent\n")
	if err := first.wait(t); err != nil {
		t.Fatal(err)
	}
	late := start(t, Options{URL: srv.URL("/ws"), Name: "bo", Room: "r"})
	late.err.wait(t, "connected")
	late.write(t, "/quit\n")
	if err := late.wait(t); err != nil {
		t.Fatal(err)
	}
	// /quit does not wait for echoes: "two" may or may not have been taken
	// before the close, "never sent" never is.
	out := late.out.lines()
	if len(out) < 1 || len(out) > 2 || !strings.HasSuffix(out[0], "] ann: one") || (len(out) == 2 && !strings.HasSuffix(out[1], "] ann: two")) {
		t.Errorf("history %q", out)
	}
}

func TestReconnectIsShownAndChatGoesOn(t *testing.T) {
	srv := servertest.Start(t, nil)
	proxy := testsupport.NewProxy(t, srv.Addr())
	s := start(t, Options{URL: proxy.URL("/ws"), Name: "ann", Room: "r"})
	s.err.wait(t, "connected")
	s.write(t, "before\n")
	s.out.wait(t, "ann: before")

	proxy.Refuse(true)
	proxy.Drop()
	s.err.wait(t, "connection lost")
	s.err.wait(t, "reconnecting in")
	other, err := client.Dial(context.Background(), client.Config{URL: srv.URL("/ws"), Room: "r", Sender: "bo"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Send(context.Background(), "while you were away"); err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy.Refuse(false)
	s.err.wait(t, "reconnected")
	s.write(t, "after\n")
	s.in.Close()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, l := range s.out.lines() {
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q", l)
		}
		texts = append(texts, m[1]+": "+m[2])
	}
	if got := strings.Join(texts, "|"); got != "ann: before|bo: while you were away|ann: after" {
		t.Errorf("output %s", got)
	}
}

func TestCancelClosesAtOnce(t *testing.T) {
	srv := servertest.Start(t, nil)
	r, w := io.Pipe()
	defer w.Close()
	errs := newLines()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{URL: srv.URL("/ws"), Name: "a", Room: "r", In: r, Err: errs}) }()
	errs.wait(t, "connected")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.Server().Stats().Disconnects[1000] != 1 { // no signal from the server: poll
		if time.Now().After(deadline) {
			t.Fatalf("disconnects %v, want one 1000", srv.Server().Stats().Disconnects)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
