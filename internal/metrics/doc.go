//go:build linux

// Package metrics exposes a scalechat node to Prometheus and to people: the
// /metrics endpoint and a live dashboard at /dashboard. The dashboard reads
// the nodes' figures back through internal/scrape, as the load test does.
//
// Every figure is read from server.Server.Stats when scraped: the event
// loops keep their own counters and pay nothing for Prometheus.
package metrics
