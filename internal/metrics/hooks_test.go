//go:build linux

package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestHookMetrics: each hook that is on has its calls by outcome and a
// latency histogram; a hook that is off has no series.
func TestHookMetrics(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), "spam") {
			io.WriteString(w, `{"allow":false,"reason":"no spam"}`)
			return
		}
		io.WriteString(w, `{"allow":true,"message":{"text":"rewritten"}}`)
	}))
	defer backend.Close()
	n := startNode(t, func(c *server.Config) { c.Hooks.PublishURL = backend.URL }, Options{})
	c := join(t, n.chatAddr, "a")
	c.sendText(`{"text":"hello"}`)
	if m := c.next(); m["text"] != "rewritten" {
		t.Fatalf("got %v", m)
	}
	c.sendText(`{"text":"spam"}`)
	if m := c.next(); m["code"] != "refused" {
		t.Fatalf("got %v", m)
	}
	testsupport.Eventually(t, 5*time.Second, "the hook's series", func() bool {
		f := n.scrape(t)
		return value(f, "scalechat_hook_calls_total", "hook=publish,outcome=replaced") == 1 &&
			value(f, "scalechat_hook_calls_total", "hook=publish,outcome=refused") == 1 &&
			value(f, "scalechat_hook_calls_total", "hook=publish,outcome=allowed") == 0 &&
			value(f, "scalechat_hook_calls_total", "hook=publish,outcome=open_circuit") == 0 &&
			value(f, "scalechat_hook_duration_seconds", "hook=publish") == 2
	})
	f := n.scrape(t)
	for _, m := range f["scalechat_hook_calls_total"].GetMetric() {
		if m.GetLabel()[0].GetValue() != "publish" {
			t.Errorf("a series for a hook that is off: %v", m)
		}
	}
}
