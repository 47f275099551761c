//go:build linux

package webui_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/server/servertest"

	"github.com/chromedp/chromedp"

	"github.com/scalechat/scalechat/client"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// shownRows selects the messages of the room the page shows, for the page's
// scripts.
const shownRows = `'#messages ol:not([hidden]) li.msg'`

// row is a message as the page shows it.
type row struct {
	Seq    string `json:"seq"`
	Sender string `json:"sender"`
	Text   string `json:"text"`
	Time   string `json:"time"`
	Own    bool   `json:"own"`
}

const rowsJS = `[...document.querySelectorAll(` + shownRows + `)].map(li => ({
	seq: li.dataset.seq,
	sender: li.querySelector('.sender').textContent,
	text: li.querySelector('.text').textContent,
	time: li.querySelector('time').textContent,
	own: li.classList.contains('own'),
}))`

// waitJS waits until the JavaScript expression is truthy, re-checking it
// whenever the page's DOM changes.
func waitJS(t *testing.T, tab context.Context, expr string) {
	t.Helper()
	if err := testsupport.WaitJS(tab, 30*time.Second, expr); err != nil {
		state, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('state').textContent`))
		t.Fatalf("waiting for %s: %v (state %q, messages %v)", expr, err, state, rows(t, tab))
	}
}

func waitState(t *testing.T, tab context.Context, state string) {
	t.Helper()
	waitJS(t, tab, fmt.Sprintf(`document.getElementById('state').dataset.state === %q`, state))
}

func waitRows(t *testing.T, tab context.Context, n int) []row {
	t.Helper()
	waitJS(t, tab, fmt.Sprintf(`document.querySelectorAll(`+shownRows+`).length >= %d`, n))
	return rows(t, tab)
}

func rows(t *testing.T, tab context.Context) []row {
	t.Helper()
	rs, err := chromedp.Run(tab, chromedp.Evaluate[[]row](rowsJS))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// summary renders rows as "seq sender: text [own]" for comparison.
func summary(rs []row) string {
	var parts []string
	for _, r := range rs {
		s := fmt.Sprintf("%s %s: %s", r.Seq, r.Sender, r.Text)
		if r.Own {
			s += " [own]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " | ")
}

func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// open loads the page at url in a new tab, sets the name and waits for the
// connection.
func open(t *testing.T, browser context.Context, url, name string) context.Context {
	t.Helper()
	tab := testsupport.NewBrowserTab(t, browser)
	testsupport.BrowserDo(t, tab, chromedp.Navigate(url))
	waitState(t, tab, "connected")
	testsupport.BrowserDo(t, tab, chromedp.SetValue(chromedp.ID("name"), name))
	return tab
}

func say(t *testing.T, tab context.Context, msg string) {
	t.Helper()
	testsupport.BrowserDo(t, tab, chromedp.SendKeys(chromedp.ID("text"), msg+"\n"))
}

var clock = regexp.MustCompile(`^\d\d:\d\d:\d\d$`)

func TestPagesExchangeMessagesAndShowHistory(t *testing.T) {
	srv := servertest.Start(t, nil)
	browser := testsupport.NewBrowser(t, 2*time.Minute)

	alice := open(t, browser, srv.HTTPURL("/#room1"), "alice")
	if got := text(t, alice, "#members"); got != "1 member" {
		t.Errorf("members %q", got)
	}
	if title, _ := chromedp.Run(alice, chromedp.Title()); title != "room1 · scalechat" {
		t.Errorf("title %q", title)
	}
	say(t, alice, "hello from alice")
	say(t, alice, `<img src=x onerror="window.pwned=1"> & <b>bold</b>`)
	if got := summary(waitRows(t, alice, 2)); got != `1 alice: hello from alice [own] | 2 alice: <img src=x onerror="window.pwned=1"> & <b>bold</b> [own]` {
		t.Errorf("alice shows %s", got)
	}

	// A late joiner gets the history, then both see live messages. Bob has
	// his own browser: tabs of one share the stored name.
	bob := open(t, testsupport.NewBrowser(t, 2*time.Minute), srv.HTTPURL("/#room1"), "bob")
	if got := text(t, bob, "#members"); got != "2 members" {
		t.Errorf("members %q", got)
	}
	if got := summary(waitRows(t, bob, 2)); got != `1 alice: hello from alice | 2 alice: <img src=x onerror="window.pwned=1"> & <b>bold</b>` {
		t.Errorf("bob's history %s", got)
	}
	say(t, bob, "hi alice")
	if got := summary(waitRows(t, alice, 3)[2:]); got != "3 bob: hi alice" {
		t.Errorf("alice got %s", got)
	}
	rs := waitRows(t, bob, 3)
	if got := summary(rs[2:]); got != "3 bob: hi alice [own]" {
		t.Errorf("bob got %s", got)
	}
	for _, r := range rs {
		if !clock.MatchString(r.Time) {
			t.Errorf("time %q is not hh:mm:ss", r.Time)
		}
	}
	// Text stays text.
	pwned, err := chromedp.Run(bob, chromedp.Evaluate[bool](`window.pwned === 1 || document.querySelector('#messages img, #messages b') !== null`))
	if err != nil || pwned {
		t.Errorf("markup from a message was run or rendered (%v)", err)
	}
	// Another room is another conversation.
	carol := open(t, browser, srv.HTTPURL("/#room2"), "carol")
	if n := len(rows(t, carol)); n != 0 {
		t.Errorf("room2 shows %d messages", n)
	}
}

// TestPageReconnectsAndMissesNothing loads the page through a proxy, cuts
// its connection, posts while it is away and checks that it comes back,
// shows each missed message once, and sends again.
func TestPageReconnectsAndMissesNothing(t *testing.T) {
	srv := servertest.Start(t, nil)
	proxy := testsupport.NewProxy(t, srv.Addr())
	browser := testsupport.NewBrowser(t, 2*time.Minute)
	writer, err := client.Dial(context.Background(), client.Config{URL: srv.URL("/ws"), Room: "r", Sender: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	post := func(texts ...string) {
		for _, s := range texts {
			if _, err := writer.Send(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := writer.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	page := open(t, browser, "http://"+proxy.Addr()+"/#r", "reader")
	post("m1", "m2")
	waitRows(t, page, 2)

	proxy.Refuse(true)
	proxy.Drop()
	waitState(t, page, "reconnecting")
	if got := text(t, page, "#state"); !regexp.MustCompile(`^reconnecting in \d+s$`).MatchString(got) {
		t.Errorf("state %q", got)
	}
	if disabled, _ := chromedp.Run(page, chromedp.Evaluate[bool](`document.getElementById('send-button').disabled`)); !disabled {
		t.Error("send button enabled while reconnecting")
	}
	post("m3", "m4", "m5")
	proxy.Refuse(false)
	waitState(t, page, "connected")
	say(t, page, "back")
	got := summary(waitRows(t, page, 6))
	want := "1 writer: m1 | 2 writer: m2 | 3 writer: m3 | 4 writer: m4 | 5 writer: m5 | 6 reader: back [own]"
	if got != want {
		t.Errorf("page shows\n %s\nwant\n %s", got, want)
	}
	for {
		select {
		case ev := <-writer.Events():
			if m, ok := ev.(*client.Message); ok && m.Seq == 6 {
				if m.Text != "back" || m.Sender != "reader" {
					t.Errorf("writer got %+v", m)
				}
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the page's message did not reach the room")
		}
	}
}

// TestPageReconnectsAfterServerRestart stops the server and starts a new
// one on the same address: the page says it is reconnecting, comes back,
// tells that the room's history is gone, and chats on.
func TestPageReconnectsAfterServerRestart(t *testing.T) {
	srv := servertest.Start(t, nil)
	browser := testsupport.NewBrowser(t, 2*time.Minute)
	page := open(t, browser, srv.HTTPURL("/#r"), "ann")
	say(t, page, "before")
	waitRows(t, page, 1)

	srv.Stop()
	waitState(t, page, "reconnecting")
	srv.Listen()
	waitState(t, page, "connected")
	waitJS(t, page, `document.querySelector('#messages li.notice.gap') !== null`)
	if got := text(t, page, "#messages li.notice.gap"); !strings.Contains(got, "started anew") {
		t.Errorf("gap notice %q", got)
	}
	say(t, page, "after")
	if got := summary(waitRows(t, page, 2)); got != "1 ann: before [own] | 1 ann: after [own]" {
		t.Errorf("page shows %s", got)
	}
}

// TestPagePassesItsTokenOn opens the page of a server that requires tokens
// as /?token=<JWT>#room: the page connects, and its messages carry the
// token's subject whatever name is typed.
func TestPagePassesItsTokenOn(t *testing.T) {
	secret := []byte("a secret for the page test, 32 b")
	v, err := auth.NewHS256(secret)
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, func(c *server.Config) { c.Auth = v })
	tok, err := auth.MintHS256(secret, "dana", []string{"vip"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tab := open(t, testsupport.NewBrowser(t, 2*time.Minute), srv.HTTPURL("/?token="+tok+"#vip"), "someone else")
	say(t, tab, "signed")
	if got := summary(waitRows(t, tab, 1)); got != "1 dana: signed" && got != "1 dana: signed [own]" {
		t.Errorf("page shows %s", got)
	}
}
