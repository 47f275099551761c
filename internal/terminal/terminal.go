// Package terminal is the terminal chat client behind `scalechat chat`: it reads
// lines from an input, posts them to a room, and prints the room's messages
// as "[15:04:05] name: text", one per line.
//
// Messages go to the output and nothing else does: prompts, connection
// states and notices go to the error output, so the output of a piped run
// is the room's conversation alone.
package terminal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/scalechat/scalechat/client"
	"github.com/scalechat/scalechat/internal/protocol"
)

// Defaults of Options.
const (
	DefaultURL          = "ws://127.0.0.1:8080/ws"
	DefaultRoom         = "lobby"
	DefaultFlushTimeout = 5 * time.Second
	// DefaultMaxLine leaves room, under the server's default 16 KiB message
	// limit, for the other fields of a message.
	DefaultMaxLine = 15 << 10
)

// Options configures Run. Empty fields take the defaults above.
type Options struct {
	URL  string // the server's WebSocket endpoint
	Room string // asked for on In when empty
	Name string // asked for on In when empty

	In  io.Reader // lines to post; "/quit" or the end of input leaves
	Out io.Writer // the room's messages
	Err io.Writer // prompts, connection states, notices

	// Location is the time zone of printed times; default time.Local.
	Location *time.Location
	// FlushTimeout bounds the wait, at the end of input, for the server to
	// echo the lines sent.
	FlushTimeout time.Duration
	// MaxLine is the longest line posted, in bytes; longer ones are refused.
	MaxLine int
	// Backoff and MaxAttempts configure reconnecting (see client.Config).
	Backoff     client.Backoff
	MaxAttempts int
}

// Run chats until the input ends, a "/quit" line, or ctx is cancelled; then
// it closes the connection with code 1000. At the end of input it first
// waits, up to FlushTimeout, for the echoes of the lines it sent, so a piped
// script's lines are posted before it leaves.
//
// The goroutine reading In is the one Run does not wait for when it returns
// before the end of input (on /quit, ctx or a lost server): a read from a
// terminal cannot be interrupted. It ends with the process or at the next
// line.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	in := bufio.NewReader(o.In)
	var err error
	if o.Name == "" {
		if o.Name, err = prompt(in, o.Err, "Your name: "); err != nil {
			return fmt.Errorf("no name given: %w", err)
		}
	}
	if o.Name == "" {
		return errors.New("the name must not be empty")
	}
	if !protocol.ValidUser(o.Name) {
		return errors.New("the name is not valid: " + protocol.UserRule) // the server would refuse it (docs/api.md#who-a-user-is)
	}
	if o.Room == "" {
		if o.Room, err = prompt(in, o.Err, "Room ["+DefaultRoom+"]: "); err != nil {
			return fmt.Errorf("no room given: %w", err)
		}
		if o.Room == "" {
			o.Room = DefaultRoom
		}
	}
	if !protocol.ValidRoomString(o.Room) {
		return fmt.Errorf("room %q: %s", o.Room, protocol.RoomRule)
	}

	u, err := client.RoomURL(o.URL, o.Room, 0, false, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Err, "connecting to %s as %s\n", u, o.Name)
	c, err := client.Dial(ctx, client.Config{URL: o.URL, Room: o.Room, Sender: o.Name, Backoff: o.Backoff, MaxAttempts: o.MaxAttempts})
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	wg.Go(func() { o.print(c) })
	runErr := o.chat(ctx, c, in)
	if err := c.Close(); err != nil && runErr == nil {
		runErr = err
	}
	wg.Wait()
	if runErr == nil {
		runErr = c.Err() // gave up reconnecting
	}
	return runErr
}

func (o *Options) defaults() {
	if o.URL == "" {
		o.URL = DefaultURL
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = DefaultFlushTimeout
	}
	if o.MaxLine <= 0 {
		o.MaxLine = DefaultMaxLine
	}
	if o.In == nil {
		o.In = strings.NewReader("")
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Err == nil {
		o.Err = io.Discard
	}
}

// prompt asks on w and reads one line from r, trimmed.
func prompt(r *bufio.Reader, w io.Writer, question string) (string, error) {
	fmt.Fprint(w, question)
	line, err := r.ReadString('\n')
	if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
		fmt.Fprintln(w)
		return "", fmt.Errorf("input ended: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// chat posts the lines of in until it ends, /quit, ctx or the client stops.
func (o *Options) chat(ctx context.Context, c *client.Client, in *bufio.Reader) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() { // not waited for: see Run
		defer close(lines)
		for {
			line, err := in.ReadString('\n')
			if line != "" {
				select {
				case lines <- strings.TrimRight(line, "\r\n"):
				case <-quit:
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr <- err
				}
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil // Ctrl+C: leave at once
		case <-c.Done():
			return nil // Run reports why
		case line, ok := <-lines:
			if !ok {
				select {
				case err := <-readErr:
					return fmt.Errorf("reading input: %w", err)
				default:
				}
				return o.flush(ctx, c)
			}
			if strings.TrimSpace(line) == "/quit" {
				return nil
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			if len(line) > o.MaxLine {
				fmt.Fprintf(o.Err, "line of %d bytes not sent: at most %d bytes\n", len(line), o.MaxLine)
				continue
			}
			if !utf8.ValidString(line) {
				line = strings.ToValidUTF8(line, "\uFFFD")
			}
			if _, err := c.Send(ctx, line); err != nil {
				if ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
					return nil
				}
				fmt.Fprintf(o.Err, "not sent: %v\n", err)
			}
		}
	}
}

// flush waits, bounded, for the echoes of the lines sent.
func (o *Options) flush(ctx context.Context, c *client.Client) error {
	fctx, cancel := context.WithTimeout(ctx, o.FlushTimeout)
	defer cancel()
	if err := c.Flush(fctx); err != nil {
		if ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
			return nil
		}
		return fmt.Errorf("%d messages not confirmed by the server within %v", c.Pending(), o.FlushTimeout)
	}
	return nil
}

// print writes the client's events until it stops.
func (o *Options) print(c *client.Client) {
	reconnecting := false
	for ev := range c.Events() {
		switch e := ev.(type) {
		case *client.Message:
			fmt.Fprintln(o.Out, Format(e, o.Location))
		case *client.Joined:
			fmt.Fprintf(o.Err, "joined %s: %s, %s of history\n", e.Room, plural(e.Members, "member"), plural(e.History, "message"))
		case *client.HistoryGap:
			if e.Reset {
				fmt.Fprintf(o.Err, "room %s started anew on the server: earlier messages are gone\n", e.Room)
			} else {
				fmt.Fprintf(o.Err, "some messages of %s after #%d are no longer in the server's history\n", e.Room, e.Since)
			}
		case *client.Left:
			fmt.Fprintf(o.Err, "left %s\n", e.Room)
		case *client.Presence:
			fmt.Fprintf(o.Err, "%s: %s\n", e.Room, plural(e.Members, "member"))
		case *client.Error:
			fmt.Fprintf(o.Err, "server refused: %s (%s)\n", e.Message, e.Code)
		case *client.State:
			switch e.State {
			case client.Connected:
				if reconnecting {
					fmt.Fprintln(o.Err, "reconnected")
				} else {
					fmt.Fprintln(o.Err, "connected: type a message and press Enter, /quit to leave")
				}
				reconnecting = false
			case client.Disconnected:
				reconnecting = true
				fmt.Fprintf(o.Err, "connection lost: %v\n", e.Err)
			case client.Reconnecting:
				fmt.Fprintf(o.Err, "reconnecting in %v (attempt %d)\n", e.Delay.Round(time.Millisecond), e.Attempt)
			}
			// Closed: Run returns why, if it was not Close.
		}
	}
}

// Format renders a message as "[15:04:05] name: text". The time is the
// server's (server_at), so every member shows the same time for a message
// whatever their own clock says, in loc; the sender's sent_at when the
// server's is missing. Control characters, which could move the cursor or
// fake lines, are shown as spaces (tabs, line breaks) or U+FFFD.
func Format(m *client.Message, loc *time.Location) string {
	t := m.ServerAt
	if t.IsZero() {
		t, _ = time.Parse(time.RFC3339Nano, m.SentAt)
	}
	ts := "--:--:--"
	if !t.IsZero() {
		ts = t.In(loc).Format("15:04:05")
	}
	name := m.Sender
	if name == "" {
		name = "anonymous"
	}
	return fmt.Sprintf("[%s] %s: %s", ts, clean(name), clean(m.Text))
}

func clean(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return '\uFFFD'
		}
		return r
	}, s)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
