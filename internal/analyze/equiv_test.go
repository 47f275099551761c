package analyze

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// simRow is one event of a simulated run.
type simRow struct {
	step, room          string
	msg, sender, client uint64
	kind                results.Kind
	t                   int64
}

func (r simRow) newLine() string {
	switch r.kind {
	case results.Joined:
		return fmt.Sprintf("%s,%s,,,%d,Joined,%d,\n", r.step, r.room, r.client, r.t)
	case results.Sent:
		return fmt.Sprintf("%s,%s,%d,%d,%d,Sent,%d,7\n", r.step, r.room, r.msg, r.sender, r.client, r.t)
	}
	return fmt.Sprintf("%s,%s,%d,%d,%d,Received,%d,\n", r.step, r.room, r.msg, r.sender, r.client, r.t)
}

func (r simRow) oldLine() string {
	return fmt.Sprintf("%d,%d,%d,%s,%d\n", r.msg, r.sender, r.client, r.kind, r.t)
}

// simStep is what a simulated step must produce, computed directly from
// the simulation (sorting the latencies), independently of the package.
type simStep struct {
	name                                             string
	rooms, roomSize                                  int
	clients, sent, expected, received, lost, orphans int64
	lat                                              []int64
}

// simulate builds a run whose rooms all have the same size within a step
// and whose members all join before the first message, so that the older
// format (expected = room_size) describes it exactly. Latencies spread
// from 0 to ~5 s to cross many histogram buckets.
func simulate(seed uint64) ([]simRow, []simStep) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var rows []simRow
	var steps []simStep
	t := int64(1_700_000_000_000_000)
	client := uint64(100)
	for si := range 3 {
		st := simStep{name: fmt.Sprintf("step%d", si+1), rooms: 1 + rng.IntN(4), roomSize: 1 + rng.IntN(6)}
		var stepRows []simRow
		members := make([][]uint64, st.rooms)
		for r := range st.rooms {
			for range st.roomSize {
				client++
				members[r] = append(members[r], client)
				stepRows = append(stepRows, simRow{st.name, fmt.Sprintf("r%d", r), 0, 0, client, results.Joined, t})
				t += int64(rng.IntN(50))
				st.clients++
			}
		}
		t += 1000
		for range 40 + rng.IntN(40) {
			r := rng.IntN(st.rooms)
			sender := members[r][rng.IntN(st.roomSize)]
			due := t + int64(rng.IntN(2000))
			t = due
			msg := uint64(len(stepRows)) // unique within the run
			room := fmt.Sprintf("r%d", r)
			stepRows = append(stepRows, simRow{st.name, room, msg, sender, sender, results.Sent, due})
			st.sent++
			st.expected += int64(st.roomSize)
			got := int64(0)
			for _, m := range members[r] {
				if rng.IntN(10) == 0 {
					continue // lost
				}
				var lat int64
				switch rng.IntN(3) {
				case 0:
					lat = int64(rng.IntN(2048)) // exact in the histogram
				case 1:
					lat = int64(rng.IntN(100_000))
				default:
					lat = int64(rng.IntN(5_000_000))
				}
				stepRows = append(stepRows, simRow{st.name, room, msg, sender, m, results.Received, due + lat})
				st.lat = append(st.lat, lat)
				got++
			}
			st.received += got
			st.lost += int64(st.roomSize) - got
		}
		// Orphans: deliveries of messages nobody sent.
		for i := range rng.IntN(3) {
			stepRows = append(stepRows, simRow{st.name, "r0", 1_000_000 + uint64(10*si+i), 1, members[0][0], results.Received, t + 10})
			st.orphans++
		}
		slices.SortStableFunc(stepRows, func(a, b simRow) int { return int(a.t - b.t) })
		rows = append(rows, stepRows...)
		steps = append(steps, st)
		t += 10_000_000
	}
	return rows, steps
}

// nearestRank is the textbook percentile: the ⌈q·n⌉-th smallest value.
func nearestRank(sorted []int64, q float64) int64 {
	r := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(r, 1)-1]
}

func checkSim(t *testing.T, got results.StepStats, w simStep) {
	t.Helper()
	if got.Sent != w.sent || got.Expected != w.expected || got.Received != w.received || got.Lost != w.lost ||
		got.Orphans != w.orphans || got.Clients != w.clients || got.Rooms != int64(w.rooms) {
		t.Errorf("step %s: got sent %d expected %d received %d lost %d orphans %d clients %d rooms %d, want %+v",
			got.Step, got.Sent, got.Expected, got.Received, got.Lost, got.Orphans, got.Clients, got.Rooms, w)
	}
	lat := slices.Clone(w.lat)
	slices.Sort(lat)
	for _, p := range got.Percentiles() {
		exact := float64(nearestRank(lat, p.Quantile)) / 1000
		// HdrHistogram with 3 significant digits: within 0.1 %, never below.
		if p.Ms < exact || p.Ms > exact*1.001+1e-9 {
			t.Errorf("step %s: %s = %v ms, exact %v ms", got.Step, p.Name, p.Ms, exact)
		}
	}
	var sum, sq float64
	for _, v := range lat {
		sum += float64(v)
	}
	mean := sum / float64(len(lat))
	for _, v := range lat {
		sq += (float64(v) - mean) * (float64(v) - mean)
	}
	std := math.Sqrt(sq / float64(len(lat)))
	if math.Abs(got.Mean-mean/1000) > 1e-6 || math.Abs(got.Stddev-std/1000) > 1e-6 {
		t.Errorf("step %s: mean, std = %v, %v, want %v, %v", got.Step, got.Mean, got.Stddev, mean/1000, std/1000)
	}
	if got.Max != float64(lat[len(lat)-1])/1000 || got.Min != float64(lat[0])/1000 {
		t.Errorf("step %s: min, max = %v, %v, want %v, %v", got.Step, got.Min, got.Max, lat[0], lat[len(lat)-1])
	}
}

// TestFormatsAgree writes the same simulated events in the current format
// and in the older headerless one and checks both against figures computed
// directly from the simulation, and against each other.
func TestFormatsAgree(t *testing.T) {
	for seed := range uint64(5) {
		rows, steps := simulate(seed)
		dir := t.TempDir()
		var newCSV strings.Builder
		newCSV.WriteString(results.EventsHeader + "\n")
		oldCSV := make(map[string]*strings.Builder)
		for _, r := range rows {
			newCSV.WriteString(r.newLine())
			if r.kind != results.Joined {
				if oldCSV[r.step] == nil {
					oldCSV[r.step] = &strings.Builder{}
				}
				oldCSV[r.step].WriteString(r.oldLine())
			}
		}
		newPath := writeFile(t, dir, "run.csv", newCSV.String())
		var stepsFile strings.Builder
		stepsFile.WriteString("# rooms,room_size,path\n")
		for _, st := range steps {
			writeFile(t, dir, st.name+".csv", oldCSV[st.name].String())
			fmt.Fprintf(&stepsFile, "%d,%d,%s.csv\n", st.rooms, st.roomSize, st.name)
		}
		oldInputs, err := ReadSteps(writeFile(t, dir, "steps.txt", stepsFile.String()))
		if err != nil {
			t.Fatal(err)
		}
		newRes := runFiles(t, Options{}, newPath)
		oldRes := runFiles(t, Options{Inputs: oldInputs})
		if len(newRes.Steps) != len(steps) || len(oldRes.Steps) != len(steps) {
			t.Fatalf("seed %d: %d and %d steps, want %d", seed, len(newRes.Steps), len(oldRes.Steps), len(steps))
		}
		for i, st := range steps {
			checkSim(t, newRes.Steps[i], st)
			checkSim(t, oldRes.Steps[i], st)
			a, b := newRes.Steps[i], oldRes.Steps[i]
			a.Step, b.Step = "", ""
			a.HotRooms, b.HotRooms = nil, nil
			a.RoomSkew, b.RoomSkew = 0, 0
			a.StartUnixUS, b.StartUnixUS = 0, 0 // the older format has no Joined rows
			if !reflect.DeepEqual(a, b) {
				t.Errorf("seed %d step %d: formats differ:\nnew %+v\nold %+v", seed, i, a, b)
			}
		}
		if newRes.Overall.Latency != oldRes.Overall.Latency || newRes.Overall.Lost != oldRes.Overall.Lost {
			t.Errorf("seed %d: overall differs:\nnew %+v\nold %+v", seed, newRes.Overall, oldRes.Overall)
		}
	}
}

// TestPartsMerge splits a run into the files of two parsers (each client's
// rows in its parser's file, one gzip-compressed) and checks the merge
// gives the figures of the whole file.
func TestPartsMerge(t *testing.T) {
	rows, steps := simulate(42)
	dir := t.TempDir()
	var whole, p0, p1 bytes.Buffer
	for _, b := range []*bytes.Buffer{&whole, &p0, &p1} {
		b.WriteString(results.EventsHeader + "\n")
	}
	for _, r := range rows {
		whole.WriteString(r.newLine())
		if r.client%2 == 0 {
			p0.WriteString(r.newLine())
		} else {
			p1.WriteString(r.newLine())
		}
	}
	wholePath := writeFile(t, dir, "whole.csv", whole.String())
	p0Path := writeFile(t, dir, "run-w0.csv", p0.String())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(p1.Bytes())
	zw.Close()
	p1Path := filepath.Join(dir, "run-w1.csv.gz")
	if err := os.WriteFile(p1Path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a := runFiles(t, Options{}, wholePath)
	b := runFiles(t, Options{Workers: 3}, p1Path, p0Path)
	for i := range steps {
		checkSim(t, b.Steps[i], steps[i])
		if a.Steps[i].Latency != b.Steps[i].Latency || a.Steps[i].Lost != b.Steps[i].Lost {
			t.Errorf("step %d: parts differ from the whole:\n%+v\n%+v", i, a.Steps[i], b.Steps[i])
		}
	}
	if b.Bytes != a.Bytes+int64(len(results.EventsHeader)+1) { // two headers instead of one
		t.Errorf("bytes = %d, want %d", b.Bytes, a.Bytes+int64(len(results.EventsHeader)+1))
	}
}
