//go:build linux

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/scalechat/scalechat/internal/server"
)

// webhookCollector reads a server's webhook counters at each scrape; it is
// registered only when webhooks are on.
type webhookCollector struct {
	srv                                      *server.Server
	queued, queuedBytes                      *prometheus.Desc
	sent, retried, failed, dropped, filtered *prometheus.Desc
}

func newWebhookCollector(srv *server.Server) *webhookCollector {
	d := prometheus.NewDesc
	return &webhookCollector{
		srv: srv,
		queued: d("scalechat_webhook_queued",
			"Webhook events waiting on this node (single node), or changes waiting to reach Redis (cluster).", nil, nil),
		queuedBytes: d("scalechat_webhook_queued_bytes",
			"What the webhook events (or changes) waiting on this node hold, roughly, in bytes; --webhook-queue-bytes bounds them.", nil, nil),
		sent: d("scalechat_webhook_sent_total",
			"Webhook events the backend took (2xx), sent by this node while it was the dispatcher.", nil, nil),
		retried: d("scalechat_webhook_retried_total",
			"Webhook requests sent again after a failure.", nil, nil),
		failed: d("scalechat_webhook_failed_total",
			"Webhook requests that failed: an error, a timeout or an answer other than 2xx (each is retried).", nil, nil),
		dropped: d("scalechat_webhook_dropped_total",
			"Webhook events never queued because the queue (or the cluster's stream) was full; each drop is also logged, at most once per 10 s.", nil, nil),
		filtered: d("scalechat_webhook_filtered_total",
			"Webhook events left unsent by a namespace's webhooks list (not lost: decided, then not sent), by this node while it was the dispatcher.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *webhookCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queued, c.queuedBytes, c.sent, c.retried, c.failed, c.dropped, c.filtered} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *webhookCollector) Collect(ch chan<- prometheus.Metric) {
	st, _ := c.srv.WebhookStats()
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(c.queuedBytes, prometheus.GaugeValue, float64(st.QueuedBytes))
	for d, v := range map[*prometheus.Desc]uint64{c.sent: st.Sent, c.retried: st.Retried, c.failed: st.Failed, c.dropped: st.Dropped, c.filtered: st.Filtered} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
}
