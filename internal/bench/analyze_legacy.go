//go:build linux

package bench

import (
	"bufio"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// The older headerless format as the original load-test client wrote it:
// message_id,sender_id,client_id,event,unix_us with UUID strings as ids,
// one file per step, rooms of one size per step (the steps file says it).

var legacySteps = []struct{ rooms, size int }{{100, 10}, {100, 20}, {40, 50}}

// generateLegacy writes about size bytes of the older format into dir, one
// file per step, and the steps file naming them; it returns the steps
// file's path.
func generateLegacy(dir string, size int64, seed uint64) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x01d))
	uuid := func() []byte {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		return fmt.Appendf(nil, "%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	steps := ""
	t0 := int64(1795238808_000000)
	for si, st := range legacySteps {
		name := fmt.Sprintf("step-%d.csv", si+1)
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		cw := &countWriter{w: f}
		bw := bufio.NewWriterSize(cw, 1<<20)
		clients := st.rooms * st.size
		ids := make([][]byte, clients)
		for i := range ids {
			ids[i] = uuid()
		}
		baseLat := 800 * float64(si+1)
		budget := size / int64(len(legacySteps))
		h := &eventHeap{}
		for c := range clients {
			due := t0 + rng.Int64N(1_000_000)
			heap.Push(h, genEvent{at: due, kind: 'S', t: due, client: int32(c)})
		}
		next := make([]uint64, clients)
		var line []byte
		for h.Len() > 0 {
			e := heap.Pop(h).(genEvent)
			c := e.client
			if e.kind == 'S' {
				if cw.n > budget {
					continue // stop sending; deliveries in flight still arrive
				}
				next[c]++
				room := int(c) / st.size
				for m := room * st.size; m < (room+1)*st.size; m++ {
					if rng.Float64() < 0.0005 {
						continue
					}
					lat := int64(baseLat*math.Exp(0.6*rng.NormFloat64())) + 1
					heap.Push(h, genEvent{at: e.t + lat, kind: 'R', t: e.t + lat, client: int32(m), msg: next[c], sender: c})
				}
				heap.Push(h, genEvent{at: e.t + 1_000_000, kind: 'S', t: e.t + 1_000_000, client: c})
				line = legacyRow(line[:0], next[c], ids[c], ids[c], "Sent", e.t)
			} else {
				line = legacyRow(line[:0], e.msg, ids[e.sender], ids[c], "Received", e.t)
			}
			bw.Write(line)
		}
		if err := bw.Flush(); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		steps += fmt.Sprintf("%d,%d,%s\n", st.rooms, st.size, name)
		t0 += 3_600_000_000
	}
	p := filepath.Join(dir, "steps.txt")
	return p, os.WriteFile(p, []byte(steps), 0o644)
}

func legacyRow(b []byte, msg uint64, sender, client []byte, event string, t int64) []byte {
	b = strconv.AppendUint(b, msg, 10)
	b = append(b, ',')
	b = append(b, sender...)
	b = append(b, ',')
	b = append(b, client...)
	b = append(b, ',')
	b = append(b, event...)
	b = append(b, ',')
	b = strconv.AppendInt(b, t, 10)
	return append(b, '\n')
}
