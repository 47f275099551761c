// Package metrics exposes a scalechat node to Prometheus and to people: the
// /metrics endpoint, a live dashboard at /dashboard, and a scraper that
// records servers' figures beside a load test's results.
//
// Every figure is read from server.Server.Stats when scraped: the event
// loops keep their own counters and pay nothing for Prometheus.
package metrics

// Metric names read back by the dashboard and the load test's scraper; the
// full list, with help texts, is in collector.go and docs/metrics.md.
const (
	nameConnections = "scalechat_connections"
	nameRooms       = "scalechat_rooms"
	nameMessagesIn  = "scalechat_messages_received_total"
	nameDeliveries  = "scalechat_messages_delivered_total"
	nameDropped     = "scalechat_messages_dropped_total"
	nameProcessing  = "scalechat_message_processing_seconds"
)
