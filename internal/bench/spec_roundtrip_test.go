//go:build linux

package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// A sweep makes each file step once per rooms value and, within it, once
// per transport, in that order, each with its template's bench: section;
// --smoke takes the smoke: values, then at most smoke_steps steps.
func TestSweepSteps(t *testing.T) {
	tests := []struct {
		name, bench string
		smoke       bool
		want        []string // step rooms transport
	}{
		{"rooms × transports", "sweep: {rooms: {from: 10, to: 20, step: 10}, transport: [websocket, polling]}", false,
			[]string{"a-websocket-10 10 websocket", "b-websocket-10 10 websocket", "a-polling-10 10 polling", "b-polling-10 10 polling",
				"a-websocket-20 20 websocket", "b-websocket-20 20 websocket", "a-polling-20 20 polling", "b-polling-20 20 polling"}},
		{"rooms alone", "sweep: {rooms: [3, 7]}", false, []string{"a-3 3 websocket", "b-3 3 polling", "a-7 7 websocket", "b-7 7 polling"}},
		{"smoke values", "sweep: {rooms: [30, 70], smoke: [1]}", true, []string{"a-1 1 websocket", "b-1 1 polling"}},
		{"smoke without its values", "sweep: {rooms: [30, 70]}, smoke_steps: 3", true, []string{"a-30 30 websocket", "b-30 30 polling", "a-70 70 websocket"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := mustSpec(t, "name: t\nsteps:\n  - {name: a}\n  - {name: b, bench: {transport: polling, row: \"b {transport} {rooms}\"}}\nbench: {round_trip: 1s, poll_interval: 1s, "+tt.bench+"}\n")
			var got []string
			for _, st := range sp.steps(tt.smoke) {
				got = append(got, st.Name+" "+itoa(st.Rooms)+" "+sp.transport(st))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("steps\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// A benchmark file of the user's own measures round trips as
// scenarios/transports.yaml does: a row per generated step named by its
// transport, judged against the file's objectives on the round trips,
// with the bytes per message in its figure, and the runs written as the
// comparison files scalechat report reads.
func TestRoundTripFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 2 servers and 2 load generators")
	}
	exe := buildScalechat(t)
	dir, file, jsonFile := t.TempDir(), filepath.Join(t.TempDir(), "rt.yaml"), filepath.Join(t.TempDir(), "rt.json")
	spec := "name: rt\nslo: [\"delivery>=100%\", \"run-polling-3:p99<0.001ms\"]\n" +
		"defaults: {room_size: 1, msg_frequency: 1s, msg_size: 100, duration: 1s, ramp: 1000}\nsteps:\n  - {name: run}\n" +
		"bench: {servers: {fresh: true}, sweep: {rooms: [3], transport: [websocket, polling]}, round_trip: 3s, poll_interval: 200ms,\n" +
		"  row: \"rt {transport} {clients}\", figure: [errors, bytes_in_per_message, bytes_out_per_message], comparison: cmp}\n"
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "bench", "--dir", dir, "--json", jsonFile, file).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3 (an objective missed):\n%s", err, out)
	}
	f, err := results.ReadBenchFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, verdict string }{{"rt websocket 3", "met"}, {"rt polling 3", "MISSED"}}
	if len(f.Rows) != len(want) {
		t.Fatalf("rows %+v\n%s", f.Rows, out)
	}
	for i, w := range want {
		r := f.Rows[i]
		if r.Scenario != w.name || r.Verdict != w.verdict || r.Ratio != 1 || r.Clients != 3 || !strings.HasPrefix(r.Figure, "0 errors; ") ||
			!strings.Contains(r.Figure, " B/msg in; ") || strings.Contains(r.Figure, "–") || r.P50 <= 0 {
			t.Errorf("row %d: %+v, want %+v", i, r, w)
		}
	}
	rows, bad, err := results.ReadComparison(filepath.Join(dir, "cmp", results.ComparisonCSV))
	if err != nil || bad != 0 || len(rows) != 2 || rows[0].Transport != results.WebSocket || rows[1].Transport != results.Polling || rows[1].BytesIn <= 0 {
		t.Fatalf("comparison: %+v, %d malformed, %v", rows, bad, err)
	}
	m, err := results.ReadComparisonMeta(filepath.Join(dir, "cmp", results.ComparisonJSON))
	if err != nil || m.Tool != "scalechat bench rt" || m.Timeout != "3s" || m.PollEvery != "200ms" || !slices.Equal(m.Clients, []int{3}) || m.MsgSize != 100 {
		t.Errorf("comparison meta: %+v, %v", m, err)
	}
}

// scalechat bench transports' defaults are scenarios/transports.yaml's:
// the comparison of issue 9.
func TestDefaultTransportsOptions(t *testing.T) {
	o := DefaultTransportsOptions()
	clients, _ := ClientSteps(100, 1000, 50)
	if !slices.Equal(o.Clients, clients) || !slices.Equal(o.Transports, results.TransportNames) || o.Timeout != 11*time.Second ||
		o.PollWait != 25*time.Second || o.PollInterval != 500*time.Millisecond || o.MsgSize != 256 || o.Ramp != 1000 {
		t.Errorf("defaults %+v", o)
	}
}
