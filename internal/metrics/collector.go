//go:build linux

package metrics

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scalechat/scalechat/internal/server"
)

// Collector is a prometheus.Collector that reads a server's Stats at each
// scrape: the server's hot path increments its own per-loop counters and
// never touches a Prometheus metric.
type Collector struct {
	stats func() server.Stats

	connections, accepted, refused, rooms, history *prometheus.Desc
	messagesIn, deliveries, dropped, disconnects   *prometheus.Desc
	bytesIn, bytesOut, brokerOut, brokerIn         *prometheus.Desc
	processing                                     *prometheus.Desc
}

// NewCollector returns a collector of the figures stats returns, normally
// (*server.Server).Stats.
func NewCollector(stats func() server.Stats) *Collector {
	d := prometheus.NewDesc
	return &Collector{
		stats: stats,
		connections: d(nameConnections,
			"WebSocket connections open now, counted from the upgrade until the socket is closed.", nil, nil),
		accepted: d("scalechat_connections_accepted_total",
			"WebSocket upgrades completed.", nil, nil),
		refused: d("scalechat_connections_refused_total",
			"Connection attempts refused before the upgrade, by reason: max_connections, shutting_down, bad_request, origin, internal.",
			[]string{"reason"}, nil),
		rooms: d(nameRooms,
			"Rooms held, empty ones still in their grace period included.", nil, nil),
		history: d("scalechat_history_entries",
			"Messages held in the rooms' history rings.", nil, nil),
		messagesIn: d(nameMessagesIn,
			"Complete text messages received from clients (chat messages and commands, accepted or not).", nil, nil),
		deliveries: d(nameDeliveries,
			"Chat messages queued to room members, the sender's echo included: one per message and member.", nil, nil),
		dropped: d(nameDropped,
			"Client messages refused and slow consumers cut off, by reason: rate_limit, too_big, invalid, slow_consumer.",
			[]string{"reason"}, nil),
		disconnects: d("scalechat_disconnects_total",
			"Connections closed, by WebSocket close code; 1006 is a connection that ended without a closing handshake, other is any code not listed.",
			[]string{"code"}, nil),
		bytesIn: d("scalechat_received_bytes_total",
			"WebSocket bytes read from clients, frame headers included.", nil, nil),
		bytesOut: d("scalechat_sent_bytes_total",
			"WebSocket bytes written to clients, frame headers included.", nil, nil),
		brokerOut: d("scalechat_broker_messages_published_total",
			"Messages published to the broker that links the nodes of a cluster; 0 on a single node.", nil, nil),
		brokerIn: d("scalechat_broker_messages_received_total",
			"Messages received from the broker that links the nodes of a cluster; 0 on a single node.", nil, nil),
		processing: d(nameProcessing,
			"Time from the event loop waking up with a client's message to read until the end of the flush that wrote it to the loop's last member of the room; counted once per message and event loop with members.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.connections, c.accepted, c.refused, c.rooms, c.history, c.messagesIn, c.deliveries,
		c.dropped, c.disconnects, c.bytesIn, c.bytesOut, c.brokerOut, c.brokerIn, c.processing,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.connections, float64(st.Connections))
	counter(c.accepted, st.Accepted)
	for _, reason := range sortedKeys(st.Refused) {
		counter(c.refused, st.Refused[reason], reason)
	}
	gauge(c.rooms, float64(st.Rooms))
	gauge(c.history, float64(st.HistoryEntries))
	counter(c.messagesIn, st.MessagesIn)
	counter(c.deliveries, st.Deliveries)
	for _, reason := range sortedKeys(st.Dropped) {
		counter(c.dropped, st.Dropped[reason], reason)
	}
	codes := make([]int, 0, len(st.Disconnects))
	for code := range st.Disconnects {
		codes = append(codes, code)
	}
	sort.Ints(codes)
	for _, code := range codes {
		label := "other"
		if code != 0 {
			label = strconv.Itoa(code)
		}
		counter(c.disconnects, st.Disconnects[code], label)
	}
	counter(c.bytesIn, st.BytesIn)
	counter(c.bytesOut, st.BytesOut)
	counter(c.brokerOut, st.BrokerOut)
	counter(c.brokerIn, st.BrokerIn)

	h := st.Processing
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b] = cum
	}
	ch <- prometheus.MustNewConstHistogram(c.processing, h.Count, h.Sum, buckets)
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
