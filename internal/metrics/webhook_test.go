//go:build linux

package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/server"
)

var webhookSeries = []string{"scalechat_webhook_queued", "scalechat_webhook_sent_total", "scalechat_webhook_retried_total",
	"scalechat_webhook_failed_total", "scalechat_webhook_dropped_total", "scalechat_webhook_filtered_total"}

// TestWebhookMetrics checks the webhook series of a node whose backend
// refuses every request: failures and retries counted, the events still
// queued; and that a node without webhooks exposes none of them.
func TestWebhookMetrics(t *testing.T) {
	refused := make(chan struct{}, 100)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
		select {
		case refused <- struct{}{}:
		default:
		}
	}))
	defer backend.Close()
	n := startNode(t, func(c *server.Config) {
		c.Webhook = server.WebhookConfig{URL: backend.URL, Secret: "webhook-secret-of-16+"}
	}, Options{})
	for range 2 { // the first request and one retry
		select {
		case <-refused:
		case <-time.After(10 * time.Second):
			t.Fatal("the backend got no request")
		}
	}
	families := n.scrape(t)
	if v := value(families, "scalechat_webhook_queued", ""); v != 1 { // the opening reset
		t.Errorf("queued %g, want 1", v)
	}
	if v := value(families, "scalechat_webhook_failed_total", ""); v < 1 {
		t.Errorf("failed %g, want at least 1", v)
	}
	if v := value(families, "scalechat_webhook_sent_total", ""); v != 0 {
		t.Errorf("sent %g, want 0", v)
	}
	for _, name := range webhookSeries {
		if families[name] == nil {
			t.Errorf("%s is missing", name)
		}
	}
	off := startNode(t, nil, Options{}).scrape(t)
	for _, name := range webhookSeries {
		if off[name] != nil {
			t.Errorf("a node without webhooks exposes %s", name)
		}
	}
}
