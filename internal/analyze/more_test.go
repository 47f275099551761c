package analyze

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// TestWindow: a message is held at least --window after its due time; a
// delivery later than that, once the message was let go (a later chunk),
// counts as an orphan and the message's delivery as lost.
func TestWindow(t *testing.T) {
	var filler strings.Builder
	for i := range 40_000 { // over a chunk: the late row lands in the next one
		fmt.Fprintf(&filler, "fill,f,,,%d,Joined,20000000,\n", 1000+i)
	}
	csv := results.EventsHeader + "\n" +
		"s,r,,,1,Joined,1000000,\n" +
		"s,r,,,2,Joined,1000000,\n" +
		"s,r,1,1,1,Sent,2000000,\n" +
		"s,r,1,1,1,Received,2000500,\n" +
		"s,r,2,1,1,Sent,20000000,\n" + // moves the watermark 18 s on
		"s,r,2,1,1,Received,20000100,\n" +
		"s,r,2,1,2,Received,20000200,\n" +
		filler.String() +
		"s,r,1,1,2,Received,20000300,\n" // 18 s late
	p := writeFile(t, t.TempDir(), "w.csv", csv)
	for _, tt := range []struct {
		window                  time.Duration
		received, lost, orphans int64
	}{
		{window: 10 * time.Second, received: 3, lost: 1, orphans: 1},
		{window: time.Minute, received: 4, lost: 0, orphans: 0},
	} {
		res := runFiles(t, Options{Window: tt.window}, p)
		s := res.Steps[0]
		if s.Received != tt.received || s.Lost != tt.lost || s.Orphans != tt.orphans || s.Expected != 4 {
			t.Errorf("window %v: received %d lost %d orphans %d expected %d, want %d %d %d 4",
				tt.window, s.Received, s.Lost, s.Orphans, s.Expected, tt.received, tt.lost, tt.orphans)
		}
	}
}

// TestMemoryBounded: a long run holds only the messages in flight.
func TestMemoryBounded(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(results.EventsHeader + "\n")
	base := int64(1_700_000_000_000_000)
	for c := range 10 {
		fmt.Fprintf(&b, "s,r,,,%d,Joined,%d,\n", c, base)
	}
	const msgs = 200_000
	for m := range msgs {
		due := base + 1_000_000 + int64(m)*1000 // 1000 messages a second
		sender := m % 10
		fmt.Fprintf(&b, "s,r,%d,%d,%d,Sent,%d,3\n", m, sender, sender, due)
		for c := range 10 {
			if m%1000 == 7 && c == 3 {
				continue // a loss now and then
			}
			fmt.Fprintf(&b, "s,r,%d,%d,%d,Received,%d,\n", m, sender, c, due+500+int64(c))
		}
	}
	p := writeFile(t, t.TempDir(), "long.csv", b.String())
	res := runFiles(t, Options{Window: 5 * time.Second}, p)
	s := res.Steps[0]
	if s.Sent != msgs || s.Expected != 10*msgs || s.Lost != msgs/1000 {
		t.Fatalf("sent %d expected %d lost %d", s.Sent, s.Expected, s.Lost)
	}
	// In flight: about settle (1 s) of complete messages plus the window
	// (5 s) of incomplete ones, 1000 and 5 of them a second, plus a chunk.
	if res.PeakInFlight > 20_000 || res.PeakInFlight == 0 {
		t.Errorf("peak messages in flight = %d of %d, want bounded by the window", res.PeakInFlight, msgs)
	}
}

func TestUnreadable(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.csv", results.EventsHeader+"\n")
	tests := []struct {
		name, content string
		want          error
	}{
		{name: "headerless.csv", content: "1,0,0,Sent,1\n", want: errNeedSteps},
		{name: "other.csv", content: "step,room,foo\n", want: errBadHeader},
		{name: "missing.csv", want: fs.ErrNotExist},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.name)
		if tt.content != "" {
			writeFile(t, dir, tt.name, tt.content)
		}
		_, err := Run(context.Background(), Options{Inputs: []Input{{Path: good}, {Path: p}}})
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want %v naming the file", tt.name, err, tt.want)
		}
	}
	bad := writeFile(t, dir, "bad.gz", "\x1f\x8bnot gzip at all")
	if _, err := Run(context.Background(), Options{Inputs: []Input{{Path: bad}}}); err == nil {
		t.Error("corrupt gzip: no error")
	}
}

// TestBadRowsNotFatal: garbage, empty and binary lines are counted, the
// rest analysed.
func TestBadRowsNotFatal(t *testing.T) {
	content := results.EventsHeader + "\n" +
		"s,r,,,1,Joined,10,\n" +
		"\x00\xff garbage\n" +
		"\n" +
		"s,r,1,1,1,Sent,100,\n" +
		"s,r,1,1,1,Received,150,,,,\n" +
		results.EventsHeader + "\n" + // a second header (concatenated files) is skipped
		"s,r,1,1,1,Received,160,\n"
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("bad line %d", i))
	}
	content += strings.Join(lines, "\n") + "\n"
	p := writeFile(t, t.TempDir(), "bad.csv", content)
	res := runFiles(t, Options{MaxErrors: 5}, p)
	if res.Malformed != 32 || len(res.Errors) != 5 {
		t.Errorf("malformed = %d, errors %d, want 32 and 5 examples", res.Malformed, len(res.Errors))
	}
	if !strings.HasPrefix(res.Errors[0], p+":3: ") || !strings.HasPrefix(res.Errors[1], p+":6: wrong number of fields") {
		t.Errorf("errors = %q", res.Errors)
	}
	s := res.Steps[0]
	if s.Received != 1 || s.P50 != 0.06 || len(res.Truncated) != 0 {
		t.Errorf("received %d p50 %v truncated %v", s.Received, s.P50, res.Truncated)
	}
}

func TestOutputsAndMeta(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "run.csv", goldenRun)
	writeFile(t, dir, "run.meta.json", `{"tool":"scalechat loadtest","machine":{"cores":2},
		"parts":["run.csv"],"steps":[{"name":"s1","saturated":false},
		{"name":"s2","saturated":true,"saturation_reason":"generator CPU 97%","clients":2}]}`)
	writeFile(t, dir, "run.server.csv", "unix_us,node,cpu_seconds,rss_bytes,connections,messages_in,deliveries,processing_p50_ms,processing_p99_ms\n")
	res := runFiles(t, Options{}, p)
	mp, err := FindMeta([]string{p})
	if err != nil || mp != filepath.Join(dir, "run.meta.json") {
		t.Fatalf("FindMeta = %q, %v", mp, err)
	}
	if err := AttachMeta(res, mp); err != nil {
		t.Fatal(err)
	}
	if res.Steps[0].Saturated || !res.Steps[1].Saturated || res.ServerMetrics != filepath.Join(dir, "run.server.csv") {
		t.Errorf("saturated %v %v, server metrics %q", res.Steps[0].Saturated, res.Steps[1].Saturated, res.ServerMetrics)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "WARNING: step s2: the load generator was saturated (generator CPU 97%)") {
		t.Errorf("table lacks the saturation warning:\n%s", table.String())
	}
	out := filepath.Join(dir, "out")
	if err := res.WriteFiles(out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, results.SummaryCSV))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || strings.Join(recs[0], ",") != strings.Join(results.SummaryHeader, ",") {
		t.Fatalf("summary.csv: %q", recs)
	}
	col := func(name string) int {
		for i, h := range recs[0] {
			if h == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return -1
	}
	// Values straight from the hand computation in analyze_test.go.
	for _, c := range []struct{ row, col, want string }{
		{"1", "p50_ms", "0.5"}, {"1", "lost", "1"}, {"2", "p99_ms", "3"}, {"2", "saturated", "true"},
		{"3", "step", "all"}, {"3", "received", "12"}, {"3", "p90_ms", "2"}, {"3", "mean_ms", "0.875"},
	} {
		row := int(c.row[0] - '0')
		if got := recs[row][col(c.col)]; got != c.want {
			t.Errorf("summary.csv row %s %s = %q, want %q", c.row, c.col, got, c.want)
		}
	}
	back, err := results.ReadSummary(filepath.Join(out, results.SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	if back.Overall.Latency != res.Overall.Latency || back.Meta == nil || back.Meta.Steps[1].Clients != 2 {
		t.Errorf("summary.json round trip: %+v", back)
	}
	series, err := results.ReadTimeseries(filepath.Join(out, results.TimeseriesCSV))
	if err != nil {
		t.Fatal(err)
	}
	var sent, deliveries int64
	for _, s := range series {
		sent += s.Sent
		deliveries += s.Deliveries
	}
	if sent != 5 || deliveries != 12 {
		t.Errorf("time series: sent %d deliveries %d, want 5 and 12", sent, deliveries)
	}
}

func TestFindMetaByParts(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "run-w1.csv.gz", "")
	writeFile(t, dir, "other.meta.json", `{"parts":["x.csv"]}`)
	writeFile(t, dir, "run.meta.json", `{"parts":["run-w0.csv.gz","run-w1.csv.gz"]}`)
	got, err := FindMeta([]string{p})
	if err != nil || got != filepath.Join(dir, "run.meta.json") {
		t.Errorf("FindMeta = %q, %v", got, err)
	}
}

func TestReadSteps(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "steps.txt", "# comment\n10,20,a.csv\n\n10, 20, /abs/b.csv\n")
	in, err := ReadSteps(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 2 || in[0].Path != filepath.Join(dir, "a.csv") || in[1].Path != "/abs/b.csv" ||
		in[0].RoomSize != 20 || in[0].Rooms != 10 || in[0].Step == in[1].Step || !in[0].Old {
		t.Errorf("ReadSteps = %+v", in)
	}
	for _, bad := range []string{"10,20\n", "x,20,a.csv\n", "0,20,a.csv\n", ""} {
		if _, err := ReadSteps(writeFile(t, dir, "bad.txt", bad)); err == nil {
			t.Errorf("ReadSteps(%q): no error", bad)
		}
	}
}

// TestTableUnmeasuredStep: the printed table shows "–", not 0.000, for the
// latencies of a step with no delivery.
func TestTableUnmeasuredStep(t *testing.T) {
	r := &Result{Summary: results.Summary{Steps: []results.StepStats{
		{Step: "ok", Sent: 1, Expected: 2, Received: 2, Latency: results.Latency{P50: 1.5, P90: 2, P99: 2, P999: 2, Max: 2, Mean: 1.7, Stddev: 0.2}},
		{Step: "dead", Sent: 1, Expected: 2},
	}}}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 16 || (f[0] != "ok" && f[0] != "dead") {
			continue
		}
		dashes := strings.Count(line, "–")
		if f[0] == "dead" && dashes != 7 || f[0] == "ok" && dashes != 0 {
			t.Errorf("%d dashes in %q", dashes, line)
		}
	}
	if !strings.Contains(b.String(), "dead") {
		t.Fatalf("no dead row:\n%s", b.String())
	}
}
