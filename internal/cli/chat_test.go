//go:build linux

package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scalechat/scalechat/client"
	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/server/servertest"
)

// lineSink is an io.Writer that hands over each complete line as it comes.
type lineSink struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	all  []string
	next chan string
}

func newLineSink() *lineSink { return &lineSink{next: make(chan string, 1000)} }

func (l *lineSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		line = strings.TrimSuffix(line, "\n")
		l.all = append(l.all, line)
		l.next <- line
	}
}

func (l *lineSink) wait(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line := <-l.next:
			if strings.Contains(line, s) {
				return
			}
		case <-timeout:
			t.Fatalf("no line with %q within 10s; got %q", s, l.lines())
		}
	}
}

func (l *lineSink) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...)
}

// chatProc is `scalechat chat` running in-process through the cobra root.
type chatProc struct {
	in       *io.PipeWriter
	out, err *lineSink
	code     chan int
}

func startChat(t *testing.T, args ...string) *chatProc {
	t.Helper()
	r, w := io.Pipe()
	p := &chatProc{in: w, out: newLineSink(), err: newLineSink(), code: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { p.code <- run(ctx, append([]string{"chat"}, args...), r, p.out, p.err) }()
	t.Cleanup(func() {
		cancel()
		w.Close()
		p.exitCode(t)
	})
	return p
}

func (p *chatProc) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *chatProc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.code:
		p.code <- code
		return code
	case <-time.After(15 * time.Second):
		t.Fatal("chat did not end within 15s")
	}
	return -1
}

var chatLine = regexp.MustCompile(`^\[(\d\d):(\d\d):(\d\d)\] ([^:]+): (.*)$`)

// checkLines checks that out is exactly want ("name: text"), each line in
// the "[15:04:05] name: text" format with a time within the test's run.
func checkLines(t *testing.T, who string, out []string, want []string, from, to time.Time) {
	t.Helper()
	if len(out) != len(want) {
		t.Errorf("%s printed %q, want %d lines %q", who, out, len(want), want)
		return
	}
	for i, line := range out {
		m := chatLine.FindStringSubmatch(line)
		if m == nil || m[4]+": "+m[5] != want[i] {
			t.Errorf("%s line %d = %q, want [hh:mm:ss] %s", who, i, line, want[i])
			continue
		}
		ts, f, e := m[1]+":"+m[2]+":"+m[3], from.Local().Format("15:04:05"), to.Local().Format("15:04:05")
		within := f <= ts && ts <= e
		if f > e { // the test ran over midnight
			within = ts >= f || ts <= e
		}
		if !within {
			t.Errorf("%s line %d: time %s is not between %s and %s", who, i, ts, f, e)
		}
	}
}

func TestChatTwoUsersExchangeLines(t *testing.T) {
	srv := servertest.Start(t, nil)
	from := time.Now().Add(-time.Second)
	url := srv.URL("/ws")
	alice := startChat(t, "--url", url, "--room", "room1", "--name", "alice")
	bob := startChat(t, "--url", url, "--room", "room1", "--name", "bob")
	alice.err.wait(t, "connected")
	bob.err.wait(t, "connected")

	alice.say(t, "hi bob")
	bob.out.wait(t, "alice: hi bob")
	bob.say(t, "hi alice, how are you?")
	alice.out.wait(t, "bob: hi alice, how are you?")
	bob.out.wait(t, "bob: hi alice, how are you?") // /quit leaves without waiting for echoes
	alice.in.Close()
	bob.say(t, "/quit")
	if code := alice.exitCode(t); code != 0 {
		t.Errorf("alice exit code %d, stderr %q", code, alice.err.lines())
	}
	if code := bob.exitCode(t); code != 0 {
		t.Errorf("bob exit code %d, stderr %q", code, bob.err.lines())
	}
	to := time.Now().Add(time.Second)
	want := []string{"alice: hi bob", "bob: hi alice, how are you?"}
	checkLines(t, "alice", alice.out.lines(), want, from, to)
	checkLines(t, "bob", bob.out.lines(), want, from, to)
	if d := srv.Server().Stats().Disconnects; d[1006] != 0 {
		t.Errorf("server saw connections end without a close handshake: %v", d)
	}
}

func TestChatPromptsWhenFlagsAreMissing(t *testing.T) {
	srv := servertest.Start(t, nil)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"chat", "--url", srv.URL("/ws")}, strings.NewReader("alice\nroom1\nhello\n"), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, errOut.String())
	}
	checkLines(t, "chat", strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), []string{"alice: hello"}, time.Now().Add(-time.Minute), time.Now())
	if !strings.HasPrefix(errOut.String(), "Your name: Room [lobby]: connecting to "+srv.URL("/ws/room1")+" as alice\n") {
		t.Errorf("stderr %q", errOut.String())
	}
}

func TestChatErrorsAreOneSentence(t *testing.T) {
	tests := []struct {
		args []string
		in   string
		want string
	}{
		{[]string{"chat", "--url", "ws://127.0.0.1:1/ws", "--name", "a", "--room", "r"}, "", "scalechat: cannot connect to ws://127.0.0.1:1/ws/r?name=a: "}, // the name: who the client is in presence
		{[]string{"chat", "--url", "ws://127.0.0.1:1/ws"}, "", "scalechat: no name given: input ended: EOF\n"},
		{[]string{"chat", "--room", "a/b", "--name", "x"}, "", `scalechat: room "a/b": ` + protocol.RoomRule + "\n"},
		{[]string{"chat", "extra"}, "", "scalechat: unknown command"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tt.args, strings.NewReader(tt.in), &out, &errOut)
		if code != 1 || !strings.Contains(errOut.String(), tt.want) || out.Len() != 0 {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want %q", tt.args, code, out.String(), errOut.String(), tt.want)
		}
	}
}

// TestChatBinaryPiped builds scalechat and pipes a script into `scalechat
// chat` as a real process, then interrupts a second one with SIGINT.
func TestChatBinaryPiped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build scalechat with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "scalechat")
	build := exec.Command(goCmd, "build", "-o", bin, "github.com/scalechat/scalechat/cmd/scalechat")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := servertest.Start(t, nil)
	watcher, err := client.Dial(context.Background(), client.Config{URL: srv.URL("/ws"), Room: "room1"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()

	cmd := exec.Command(bin, "chat")
	cmd.Env = append(os.Environ(), "SCALECHAT_URL="+srv.URL("/ws"))
	cmd.Stdin = strings.NewReader("alice\nroom1\nhello\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("scalechat chat: %v\nstderr: %s", err, errOut.String())
	}
	checkLines(t, "chat", strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), []string{"alice: hello"}, time.Now().Add(-time.Minute), time.Now())
	for {
		select {
		case ev := <-watcher.Events():
			if m, ok := ev.(*client.Message); ok {
				if m.Sender != "alice" || m.Text != "hello" {
					t.Errorf("watcher got %+v", m)
				}
				goto posted
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the room did not get hello")
		}
	}
posted:
	// Ctrl+C: exit 0 after a close with 1000.
	before := srv.Server().Stats().Disconnects[1000]
	cmd = exec.Command(bin, "chat", "--url", srv.URL("/ws"), "--room", "room1", "--name", "bob")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stderr := newLineSink()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderr.wait(t, "connected")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGINT: %v, stderr %q", err, stderr.lines())
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.Server().Stats().Disconnects[1000] != before+1 { // no signal from the server: poll
		if time.Now().After(deadline) {
			t.Fatalf("disconnects %v, want one more 1000", srv.Server().Stats().Disconnects)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
