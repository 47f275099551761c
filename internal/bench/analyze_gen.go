//go:build linux

package bench

import (
	"bufio"
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/scalechat/scalechat/internal/results"
)

// The generator writes a CSV like a real `scalechat loadtest` run: several
// steps of growing load; rooms of several sizes (a few big ones); clients
// joining during a ramp and then sending one message a second each at a
// random phase; the sender's echo and every member's delivery written at
// its receive time, so Joined, Sent and Received rows interleave in time
// order; log-normal latencies growing with the load, rare spikes and a
// little loss.

type genStep struct {
	name     string
	clients  int
	baseLat  float64 // median latency, µs
	lossRate float64
}

var genSteps = []genStep{
	{"step-1", 2000, 900, 0.0001},
	{"step-2", 5000, 2500, 0.0005},
	{"step-3", 10000, 7000, 0.002},
}

// roomSizes are drawn for each new room until the step's clients are used.
var roomSizes = []int{2, 2, 5, 5, 10, 10, 10, 20, 20, 50, 100, 500}

type genEvent struct {
	at     int64 // write time
	kind   byte  // 'J', 'S', 'R'
	t      int64 // unix_us column
	client int32 // index within the step
	msg    uint64
	sender int32
	lag    int64
}

type eventHeap []genEvent

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(genEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// generateEvents writes about size bytes of CSV to w and returns the bytes written.
func generateEvents(w io.Writer, size int64, seed uint64) (int64, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	bw.WriteString(results.EventsHeader + "\n")
	t0 := int64(1763719200_000000)
	clientBase := 0
	// Each step gets an equal share of the bytes.
	for si, st := range genSteps {
		stepBudget := size * int64(si+1) / int64(len(genSteps))
		// Rooms.
		room := make([]int32, st.clients) // client → room
		var members [][]int32
		for c := 0; c < st.clients; {
			n := min(roomSizes[rng.IntN(len(roomSizes))], st.clients-c)
			r := int32(len(members))
			var ms []int32
			for range n {
				room[c] = r
				ms = append(ms, int32(c))
				c++
			}
			members = append(members, ms)
		}
		roomNames := make([]string, len(members))
		for i := range roomNames {
			roomNames[i] = fmt.Sprintf("room-%05d", i)
		}
		joinedAt := make([]int64, st.clients)
		nextMsg := make([]uint64, st.clients)
		h := &eventHeap{}
		// Ramp: 1000 joins per second, in random order.
		order := rng.Perm(st.clients)
		for i, c := range order {
			jt := t0 + int64(i)*1000 + rng.Int64N(1000)
			joinedAt[c] = jt
			heap.Push(h, genEvent{at: jt, kind: 'J', t: jt, client: int32(c)})
			// First message due 1-2 s after joining, then every second.
			due := jt + 1_000_000 + rng.Int64N(1_000_000)
			heap.Push(h, genEvent{at: due, kind: 'S', t: due, client: int32(c)})
		}
		stopSending := false
		var last int64
		var line []byte
		for h.Len() > 0 {
			e := heap.Pop(h).(genEvent)
			last = e.t
			c := e.client
			ev := results.Event{Step: st.name, Room: roomNames[room[c]], ClientID: uint64(clientBase + int(c)), UnixUS: e.t, LagUS: -1}
			switch e.kind {
			case 'J':
				ev.Kind = results.Joined
			case 'S':
				if e.lag == 0 && e.at == e.t {
					// Not yet written: decide the write lag, schedule the
					// row at due+lag and the deliveries after it.
					if stopSending {
						continue
					}
					nextMsg[c]++
					lag := 20 + int64(rng.ExpFloat64()*60)
					heap.Push(h, genEvent{at: e.t + lag, kind: 'S', t: e.t, client: c, msg: nextMsg[c], lag: lag})
					for _, m := range members[room[c]] {
						if joinedAt[m] > e.t || rng.Float64() < st.lossRate {
							continue
						}
						lat := int64(st.baseLat * math.Exp(0.6*rng.NormFloat64()))
						if rng.IntN(1000) == 0 {
							lat += 50_000 + rng.Int64N(150_000) // a GC pause or a full queue
						}
						lat = max(lat, lag+10)
						heap.Push(h, genEvent{at: e.t + lat, kind: 'R', t: e.t + lat, client: m, msg: nextMsg[c], sender: c})
					}
					heap.Push(h, genEvent{at: e.t + 1_000_000, kind: 'S', t: e.t + 1_000_000, client: c})
					continue
				}
				ev.Kind, ev.MessageID, ev.SenderID, ev.LagUS = results.Sent, e.msg, ev.ClientID, e.lag
			case 'R':
				ev.Kind, ev.MessageID, ev.SenderID = results.Received, e.msg, uint64(clientBase+int(e.sender))
				ev.Room = roomNames[room[e.sender]]
			}
			line = results.AppendEvent(line[:0], &ev)
			if _, err := bw.Write(line); err != nil {
				return cw.n, err
			}
			if !stopSending && cw.n+int64(bw.Buffered()) >= stepBudget {
				stopSending = true // let the messages in flight arrive
			}
		}
		clientBase += st.clients
		t0 = last + 5_000_000
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
