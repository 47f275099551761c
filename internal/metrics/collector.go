//go:build linux

package metrics

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scalechat/scalechat/internal/hooks"
	"github.com/scalechat/scalechat/internal/scrape"
	"github.com/scalechat/scalechat/internal/server"
)

// Collector is a prometheus.Collector that reads a server's Stats (and its
// broker's) at each scrape: the server's hot path increments its own
// per-loop counters and never touches a Prometheus metric.
type Collector struct {
	srv *server.Server

	connections, accepted, refused, rooms, history       *prometheus.Desc
	messagesIn, deliveries, dropped, disconnects         *prometheus.Desc
	bytesIn, bytesOut, brokerOut, brokerIn               *prometheus.Desc
	processing                                           *prometheus.Desc
	polls, pollsWaiting, httpIn, httpOut                 *prometheus.Desc
	httpBytesIn, httpBytesOut, historyBytes, historyJSON *prometheus.Desc
	apiRequests, apiPublished                            *prometheus.Desc
	hookCalls, hookDuration, hookJobsGone                *prometheus.Desc

	// Only in a cluster.
	brokerUp, brokerErrors, brokerLocal, brokerGaps, brokerLost, brokerReconnects, brokerRooms *prometheus.Desc
	brokerOwned, brokerOwnedMsgs, brokerReleases, brokerCeded, brokerTakeovers, brokerDropped  *prometheus.Desc
	brokerRefused, brokerDiverged, brokerOverloaded, brokerTransit                             *prometheus.Desc
}

// NewCollector returns a collector of srv's figures.
func NewCollector(srv *server.Server) *Collector {
	d := prometheus.NewDesc
	return &Collector{
		srv: srv,
		connections: d(scrape.NameConnections,
			"WebSocket connections open now, counted from the upgrade until the socket is closed.", nil, nil),
		accepted: d("scalechat_connections_accepted_total",
			"WebSocket upgrades completed.", nil, nil),
		refused: d("scalechat_connections_refused_total",
			"Connection attempts and HTTP transport requests refused, by reason: max_connections, shutting_down, bad_request, origin, internal, auth, forbidden, per_ip, connect_rate, rooms_full, header_too_large, handshake_timeout, body_timeout, body_too_large, hook (the connect hook, or the join hook of the URL's room, refused or did not answer).",
			[]string{"reason"}, nil),
		rooms: d(scrape.NameRooms,
			"Rooms held, empty ones still in their grace period included.", nil, nil),
		history: d("scalechat_history_entries",
			"Messages held in the rooms' history rings.", nil, nil),
		messagesIn: d(scrape.NameMessagesIn,
			"Complete text messages received from clients (chat messages and commands, accepted or not).", nil, nil),
		deliveries: d(scrape.NameDeliveries,
			"Chat messages queued to room members, the sender's echo included: one per message and member.", nil, nil),
		dropped: d(scrape.NameDropped,
			"Client messages refused and connections cut off, by reason: rate_limit, too_big, invalid, slow_consumer, forbidden (join not allowed by the token, the room's namespace or the room cap), timeout (frame deadlines), unavailable (a message to a room shared with other nodes while Redis is unreachable), backend_only (a client's message where only the backend publishes), room_full (a join past the namespace's max_members), hook (a join or message the application's backend refused or did not answer for).",
			[]string{"reason"}, nil),
		disconnects: d("scalechat_disconnects_total",
			"Connections closed, by WebSocket close code; 1006 is a connection that ended without a closing handshake, other is any code not listed.",
			[]string{"code"}, nil),
		bytesIn: d("scalechat_received_bytes_total",
			"WebSocket bytes read from clients, frame headers included.", nil, nil),
		bytesOut: d("scalechat_sent_bytes_total",
			"WebSocket bytes written to clients, frame headers included.", nil, nil),
		brokerOut: d("scalechat_broker_messages_published_total",
			"Messages this node's members sent to rooms owned by another node of the cluster, sent on to the owner through the broker (Redis) and answered; 0 on a single node.", nil, nil),
		brokerIn: d("scalechat_broker_messages_received_total",
			"Messages of rooms this node follows, received from their owner nodes through the broker (Redis), this node's own included; 0 on a single node.", nil, nil),
		brokerUp: d("scalechat_broker_up",
			"1 when the broker (Redis) answers, 0 while it is unreachable: rooms owned here go on, messages to rooms shared with other nodes are refused. Cluster only.", nil, nil),
		brokerErrors: d("scalechat_broker_errors_total",
			"Failed broker (Redis) operations. Cluster only.", nil, nil),
		brokerLocal: d("scalechat_broker_local_messages_total",
			"Messages of rooms owned here that no other node follows, ordered while the broker was unreachable. Cluster only.", nil, nil),
		brokerGaps: d("scalechat_broker_gap_fills_total",
			"Messages fetched from the broker's history because its channel missed them. Cluster only.", nil, nil),
		brokerLost: d("scalechat_broker_unrecovered_total",
			"Sequence numbers skipped because the broker no longer held their messages. Cluster only.", nil, nil),
		brokerReconnects: d("scalechat_broker_reconnects_total",
			"Reconnections to the broker. Cluster only.", nil, nil),
		brokerRooms: d("scalechat_broker_rooms",
			"Rooms this node is subscribed to at the broker. Cluster only.", nil, nil),
		brokerOwned: d("scalechat_broker_owned_rooms",
			"Rooms this node owns: their messages are ordered here (for every node that has the room), Redis only carrying and storing them. Cluster only.", nil, nil),
		brokerOwnedMsgs: d("scalechat_broker_owned_messages_total",
			"Messages of owned rooms, ordered and delivered on this node without a Redis round trip. Cluster only.", nil, nil),
		brokerReleases: d("scalechat_broker_room_releases_total",
			"Owned rooms this node gave up: handed to a node that follows them, or freed. Cluster only.", nil, nil),
		brokerCeded: d("scalechat_broker_rooms_ceded_total",
			"Owned rooms this node handed to a node that follows them while its own members stayed, because it owned more of the rooms it shares with other nodes than it followed: ownership evened out. Counted in releases too. Cluster only.", nil, nil),
		brokerTakeovers: d("scalechat_broker_room_takeovers_total",
			"Rooms this node took over (under a new epoch) from an owner that did not answer. Cluster only.", nil, nil),
		brokerDropped: d("scalechat_broker_rooms_dropped_total",
			"Rooms this node owned that another node took over; their members were closed with 1012 and rejoined. Cluster only.", nil, nil),
		brokerRefused: d("scalechat_broker_refused_total",
			"Publishes refused to their sender (error unavailable) because Redis was unreachable: at once for a room shared with other nodes, or after the fact for one sent on to an owner that did not answer (it may still arrive). Cluster only.", nil, nil),
		brokerOverloaded: d("scalechat_broker_overloaded_total",
			"Publishes refused to their sender (error unavailable) because this node's messages to other nodes had waited longer than --redis-max-wait: the cluster was past its capacity. Cluster only.", nil, nil),
		brokerTransit: d("scalechat_broker_transit_seconds",
			"Time from another node making a round of messages and records for this node to this node reading it: Redis's queue, its write to this node's subscription, and what waits in that socket to be read; the nodes' clocks differ by their offset. Cluster only.", nil, nil),
		brokerDiverged: d("scalechat_broker_rooms_diverged_total",
			"Rooms whose stream Redis no longer had when it came back (restarted without its data, a failover lost writes): new epoch, members closed with 1012 to resume and told reset. Cluster only.", nil, nil),
		apiRequests: d("scalechat_api_requests_total",
			"Requests to the server API (/api/) by outcome: ok (the key was right), unauthorized, bad_request.", []string{"outcome"}, nil),
		apiPublished: d("scalechat_api_published_total",
			"Chat messages published through the server API.", nil, nil),
		hookCalls: d("scalechat_hook_calls_total",
			"Calls to the application's backend's hooks (docs/hooks.md), by hook (connect, join, publish) and outcome: allowed, refused, replaced (publish: allowed with another message), error (no valid answer: connection refused, a status other than 200, an answer that does not parse or cannot apply), timeout, open_circuit (not called: the hook's circuit breaker is open). A hook that is off has none.",
			[]string{"hook", "outcome"}, nil),
		hookDuration: d("scalechat_hook_duration_seconds",
			"Time from sending a hook's request until its answer is read (or the call fails), by hook; calls not made (open circuit) are not in it.",
			[]string{"hook"}, nil),
		hookJobsGone: d("scalechat_hook_calls_skipped_total",
			"Join and publish hook calls not made because their connection closed before a hook worker took them (their verdict would have been dropped).", nil, nil),
		historyBytes: d("scalechat_history_bytes",
			"Bytes the rooms' history rings cost: each message's buffer as allocated (JSON, frame header, the allocator's rounding) and its slot in the ring.", nil, nil),
		historyJSON: d("scalechat_history_json_bytes",
			"Bytes of JSON held in the rooms' history rings: (scalechat_history_bytes - this) / scalechat_history_entries is what an entry costs beyond its JSON.", nil, nil),
		polls: d("scalechat_http_polls_total",
			"GET /rooms/{room}/messages requests of the HTTP transport.", nil, nil),
		pollsWaiting: d("scalechat_http_polls_waiting",
			"Long polls of the HTTP transport waiting for a message now.", nil, nil),
		httpIn: d("scalechat_http_messages_received_total",
			"Chat messages POSTed over the HTTP transport (also counted in scalechat_messages_received_total).", nil, nil),
		httpOut: d("scalechat_http_messages_delivered_total",
			"Chat messages returned to polls of the HTTP transport (also counted in scalechat_messages_delivered_total).", nil, nil),
		httpBytesIn: d("scalechat_http_received_bytes_total",
			"Bytes read on HTTP connections: requests, polls, WebSocket handshakes (with TLS: all the TLS connection's bytes).", nil, nil),
		httpBytesOut: d("scalechat_http_sent_bytes_total",
			"Bytes written on HTTP connections: answers, polls, WebSocket handshakes (with TLS: all the TLS connection's bytes).", nil, nil),
		processing: d(scrape.NameProcessing,
			"Time from the event loop waking up with a client's message to read until the end of the flush that wrote it to the loop's last member of the room; counted once per message and event loop with members.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.connections, c.accepted, c.refused, c.rooms, c.history, c.messagesIn, c.deliveries,
		c.dropped, c.disconnects, c.bytesIn, c.bytesOut, c.brokerOut, c.brokerIn, c.processing,
		c.apiRequests, c.apiPublished, c.historyBytes, c.historyJSON, c.hookCalls, c.hookDuration, c.hookJobsGone, c.polls, c.pollsWaiting, c.httpIn, c.httpOut, c.httpBytesIn, c.httpBytesOut,
		c.brokerUp, c.brokerErrors, c.brokerLocal, c.brokerGaps, c.brokerLost, c.brokerReconnects, c.brokerRooms,
		c.brokerOwned, c.brokerOwnedMsgs, c.brokerReleases, c.brokerCeded, c.brokerTakeovers, c.brokerDropped,
		c.brokerRefused, c.brokerDiverged, c.brokerOverloaded, c.brokerTransit,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.Stats()
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
	gauge(c.historyBytes, float64(st.HistoryBytes))
	gauge(c.historyJSON, float64(st.HistoryJSONBytes))
	counter(c.polls, st.Polls)
	for _, outcome := range []string{"ok", "unauthorized", "bad_request"} {
		counter(c.apiRequests, st.API[outcome], outcome)
	}
	counter(c.apiPublished, st.API["published"])
	for _, h := range st.Hooks {
		for _, o := range hooks.Outcomes() {
			counter(c.hookCalls, h.Outcomes[o], h.Hook, o.String())
		}
		ch <- prometheus.MustNewConstHistogram(c.hookDuration, h.Count, h.Sum, cumulative(h.Bounds, h.Counts), h.Hook)
	}
	if len(st.Hooks) > 0 {
		counter(c.hookJobsGone, st.HookJobsGone)
	}
	gauge(c.pollsWaiting, float64(st.PollsWaiting))
	counter(c.httpIn, st.HTTPMessagesIn)
	counter(c.httpOut, st.HTTPDeliveries)
	counter(c.httpBytesIn, st.HTTPBytesIn)
	counter(c.httpBytesOut, st.HTTPBytesOut)
	bs, cluster := c.srv.BrokerStats()
	counter(c.brokerOut, bs.Published)
	counter(c.brokerIn, bs.Received)
	if cluster {
		up := 0.0
		if bs.Up {
			up = 1
		}
		gauge(c.brokerUp, up)
		counter(c.brokerErrors, bs.Errors)
		counter(c.brokerLocal, bs.Local)
		counter(c.brokerGaps, bs.Gaps)
		counter(c.brokerLost, bs.Unrecovered)
		counter(c.brokerReconnects, bs.Reconnects)
		gauge(c.brokerRooms, float64(bs.Rooms))
		gauge(c.brokerOwned, float64(bs.Owned))
		counter(c.brokerOwnedMsgs, bs.OwnedPublished)
		counter(c.brokerReleases, bs.Releases)
		counter(c.brokerCeded, bs.Ceded)
		counter(c.brokerTakeovers, bs.Takeovers)
		counter(c.brokerDropped, bs.Dropped)
		counter(c.brokerRefused, bs.Refused)
		counter(c.brokerDiverged, bs.Diverged)
		counter(c.brokerOverloaded, bs.Overloaded)
		t := bs.Transit
		ch <- prometheus.MustNewConstHistogram(c.brokerTransit, t.Count, t.Sum, cumulative(t.Bounds, t.Counts))
	}

	h := st.Processing
	ch <- prometheus.MustNewConstHistogram(c.processing, h.Count, h.Sum, cumulative(h.Bounds, h.Counts))
}

// cumulative turns per-bucket counts into Prometheus's cumulative buckets
// by upper bound.
func cumulative(bounds []float64, counts []uint64) map[float64]uint64 {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		cum += counts[i]
		buckets[b] = cum
	}
	return buckets
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
