//go:build linux

package webui_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/server/servertest"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestPageShowsHookRefusals: what the application's backend refuses (a
// message, a connection) reaches the page as a readable notice, not a
// silent drop or an endless reconnect.
func TestPageShowsHookRefusals(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Hook, Name string
			Message    struct{ Text string }
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil {
			t.Errorf("hook request: %v", err)
		}
		switch {
		case req.Hook == "connect" && req.Name == "mallory":
			io.WriteString(w, `{"allow":false,"status":403,"reason":"mallory is banned"}`)
		case req.Hook == "publish" && strings.Contains(req.Message.Text, "spam"):
			io.WriteString(w, `{"allow":false,"reason":"no spam here"}`)
		default:
			io.WriteString(w, `{"allow":true}`)
		}
	}))
	defer backend.Close()
	srv := servertest.Start(t, func(c *server.Config) {
		c.Hooks.ConnectURL, c.Hooks.PublishURL = backend.URL+"/connect", backend.URL+"/publish"
	})
	tab := open(t, testsupport.NewBrowser(t, 2*time.Minute), srv.HTTPURL("/#lobby"), "ann")
	say(t, tab, "buy spam")
	waitJS(t, tab, `[...document.querySelectorAll('li.notice.error')].some(li => li.textContent === 'Not sent: no spam here')`)

	if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(() => {
		const n = document.getElementById('name');
		n.value = 'mallory';
		n.dispatchEvent(new Event('change'));
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, `[...document.querySelectorAll('li.notice.error')].some(li => li.textContent === 'Refused by the application: mallory is banned.')`)
	waitState(t, tab, "disconnected")
}
