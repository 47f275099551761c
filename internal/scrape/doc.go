// Package scrape reads scalechat nodes' Prometheus metrics from outside:
// the scraper that records servers' figures beside a load test's results
// (<out>.server.csv), and the snapshots and histogram arithmetic the node's
// own dashboard shares with it. For a local server without metrics it reads
// the process's CPU time and memory from /proc instead (PIDSource).
//
// It knows the metric names, not the server: the lab links it without
// linking the server (internal/metrics exposes the figures under these names).
package scrape

// Metric names the scraper reads back; internal/metrics exposes the node's
// figures under them (the full list, with help texts, is in
// internal/metrics/collector.go and docs/metrics.md).
const (
	NameConnections = "scalechat_connections"
	NameRooms       = "scalechat_rooms"
	NameMessagesIn  = "scalechat_messages_received_total"
	NameDeliveries  = "scalechat_messages_delivered_total"
	NameDropped     = "scalechat_messages_dropped_total"
	NameProcessing  = "scalechat_message_processing_seconds"
)
