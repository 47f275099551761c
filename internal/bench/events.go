//go:build linux

package bench

import (
	"sort"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/scalechat/scalechat/internal/results"
)

// Some scenarios need more than a step's summary: the latency of the
// messages due in a time window (connect storm), or deliveries split by
// whether sender and recipient were on the same node (cluster). Both come
// from the loadtest's events CSV (docs/csv.md).

type msgKey struct{ sender, id uint64 }

type sentMsg struct {
	room string
	due  int64
}

type join struct {
	client uint64
	at     int64
}

// joinedAt reads a join's time for results.Owed.
func joinedAt(j join) int64 { return j.at }

type delivery struct {
	key    msgKey
	client uint64
	at     int64
}

// events is the content of one or more events CSVs of the same run.
type events struct {
	sent     map[msgKey]sentMsg
	received []delivery
	joins    map[string][]join // per room, sorted by time
}

// readEvents reads events CSVs (plain or gzipped).
func readEvents(paths ...string) (*events, error) {
	ev := &events{sent: map[msgKey]sentMsg{}, joins: map[string][]join{}}
	for _, p := range paths {
		if err := ev.read(p); err != nil {
			return nil, err
		}
	}
	for _, js := range ev.joins {
		sort.Slice(js, func(i, j int) bool { return js[i].at < js[j].at })
	}
	return ev, nil
}

func (ev *events) read(path string) error {
	return results.ReadEvents(path, func(e *results.Event) error {
		switch e.Kind {
		case results.Joined:
			ev.joins[e.Room] = append(ev.joins[e.Room], join{e.ClientID, e.UnixUS})
		case results.Sent:
			ev.sent[msgKey{e.SenderID, e.MessageID}] = sentMsg{room: e.Room, due: e.UnixUS}
		case results.Received:
			ev.received = append(ev.received, delivery{key: msgKey{e.SenderID, e.MessageID}, client: e.ClientID, at: e.UnixUS})
		}
		return nil
	})
}

// latencies summarises a group of deliveries.
type latencies struct {
	h        *hdrhistogram.Histogram
	expected int64
}

func newLatencies() *latencies { return &latencies{h: hdrhistogram.New(1, 100_000_000, 3)} }

func (l *latencies) add(us int64) { _ = l.h.RecordValue(min(max(us, 0), 100_000_000)) }

func (l *latencies) count() int64 { return l.h.TotalCount() }

func (l *latencies) ratio() float64 {
	if l.expected == 0 {
		return -1
	}
	return float64(l.count()) / float64(l.expected)
}

func (l *latencies) ms(q float64) float64 {
	if l.count() == 0 {
		return 0
	}
	if q >= 100 {
		return float64(l.h.Max()) / 1000
	}
	return float64(l.h.ValueAtQuantile(q)) / 1000
}

// group sorts deliveries of messages accepted by keep (given the message
// and, for a delivery, the recipient; recipient is the sender itself when
// counting expected deliveries) into named groups. Expected deliveries of
// a message are the clients results.Owed counts, each put in the group
// classify gives.
func (ev *events) group(keep func(m sentMsg) bool, classify func(sender, recipient uint64) string) map[string]*latencies {
	out := map[string]*latencies{}
	get := func(name string) *latencies {
		l := out[name]
		if l == nil {
			l = newLatencies()
			out[name] = l
		}
		return l
	}
	for k, m := range ev.sent {
		if !keep(m) {
			continue
		}
		joins := ev.joins[m.room]
		for _, j := range joins[:results.Owed(joins, joinedAt, m.due)] {
			get(classify(k.sender, j.client)).expected++
		}
	}
	for _, d := range ev.received {
		m, ok := ev.sent[d.key]
		if !ok || !keep(m) {
			continue // an orphan, or outside the window
		}
		get(classify(d.key.sender, d.client)).add(d.at - m.due)
	}
	return out
}
