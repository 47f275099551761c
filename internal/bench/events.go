package bench

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
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

// readEvents reads plain (not gzipped) events CSVs.
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
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			continue // header
		}
		// step,room,message_id,sender_id,client_id,event,unix_us,lag_us
		f := strings.Split(sc.Text(), ",")
		if len(f) != 8 {
			return fmt.Errorf("%s:%d: %d fields, want 8", path, line, len(f))
		}
		client, err1 := strconv.ParseUint(f[4], 10, 64)
		at, err2 := strconv.ParseInt(f[6], 10, 64)
		if err := errJoin(err1, err2); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if f[5] == "Joined" {
			ev.joins[f[1]] = append(ev.joins[f[1]], join{client, at})
			continue
		}
		id, err1 := strconv.ParseUint(f[2], 10, 64)
		sender, err2 := strconv.ParseUint(f[3], 10, 64)
		if err := errJoin(err1, err2); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		k := msgKey{sender, id}
		switch f[5] {
		case "Sent":
			ev.sent[k] = sentMsg{room: f[1], due: at}
		case "Received":
			ev.received = append(ev.received, delivery{key: k, client: client, at: at})
		default:
			return fmt.Errorf("%s:%d: unknown event %q", path, line, f[5])
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
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
// a message are the clients that had joined its room at or before its due
// time (docs/csv.md), each put in the group classify gives.
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
		for _, j := range ev.joins[m.room] {
			if j.at > m.due {
				break
			}
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
