package capacity

import (
	"encoding/json"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/scalechat/scalechat/internal/results"
)

// testFigures are the lab's figures of 2026-11-21 and 2026-11-23 (the
// committed results of benchmarks/results when the model was written), so
// that the hand-solved costs below do not change when new results are
// committed.
func testFigures() []Figure {
	return []Figure{
		{KeyBusySmall, 16.75, "µs/delivery", "test", busySmallRate},
		{KeyLightSmall, 25.52, "µs/delivery", "test", lightSmallRate},
		{KeyBigRoom, 5.63, "µs/delivery", "test", bigRoomRate},
		{KeyMidRooms, 12.19, "µs/delivery", "test", midRoomsRate},
		{KeyMidRooms, 17.82, "µs/delivery", "test", midRoomsRate},
		{KeyIdleKiB, 1.26, "KiB/connection", "test", 0},
		{KeyConnectUS, 308, "µs/client", "test", 0},
		{KeySplitRatio, 2.22, "×", "test", 0},
		{KeySplitRedis, 22.4, "µs/delivery", "test", 0},
		{KeyOwnedRatio, 1.29, "×", "test", 0},
		{KeyOwnedRedis, 9.9, "µs/delivery", "test", 0},
	}
}

// TestLabFigures: scalechat plan's default costs come from the committed
// results files, every figure the model needs from one of them, named in
// its source, and they fit the model.
func TestLabFigures(t *testing.T) {
	figs, err := LabFigures()
	if err != nil {
		t.Fatal(err)
	}
	dir := os.DirFS("../../" + LabDir)
	for _, f := range figs {
		file, _, ok := strings.Cut(strings.TrimPrefix(f.Source, LabDir+"/"), " (")
		if _, err := fs.Stat(dir, file); !ok || err != nil {
			t.Errorf("%s: its source %q names no committed results file", f.Key, f.Source)
		}
	}
	if len(figs) != len(figureKeys()) {
		t.Errorf("%d figures, want one of each of the %d keys", len(figs), len(figureKeys()))
	}
	if _, err := Derive(figs); err != nil {
		t.Errorf("the committed results do not fit the model: %v", err)
	}
}

// TestFromResultsNewestWins: of two files with the same figure, the newer
// one's counts, and a figure no file has is named in the error.
func TestFromResultsNewestWins(t *testing.T) {
	file := func(date string, v float64) *fstest.MapFile {
		f := results.BenchFile{Version: "test", Machine: "test", Date: date, Rows: []results.BenchRow{{Scenario: "rooms 2500×4", PerSecond: 40000, CPUPerDel: v}}}
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return &fstest.MapFile{Data: b}
	}
	// The older file's name sorts last: the date decides, not the name.
	fsys := fstest.MapFS{"b-new.json": file("2026-11-25", 11), "z-old.json": file("2026-11-21", 17)}
	_, err := FromResults(fsys, "dir")
	if err == nil || !strings.Contains(err.Error(), "no results file of dir has the figure "+KeyLightSmall) {
		t.Fatalf("error %v, want one naming %s", err, KeyLightSmall)
	}
	got := figuresOf(mustRead(t, fsys, "b-new.json"), "dir/b-new.json")
	if f := got[KeyBusySmall]; f.Value != 11 || !strings.HasPrefix(f.Source, "dir/b-new.json (test, test, 2026-11-25)") {
		t.Errorf("figure %+v", f)
	}
	all := map[string]Figure{}
	for _, n := range []string{"z-old.json", "b-new.json"} {
		for k, f := range figuresOf(mustRead(t, fsys, n), n) {
			all[k] = f
		}
	}
	if all[KeyBusySmall].Value != 11 {
		t.Errorf("busy rooms %g, want the newer file's 11", all[KeyBusySmall].Value)
	}
}

func mustRead(t *testing.T, fsys fs.FS, name string) results.BenchFile {
	t.Helper()
	f, err := results.ReadBenchFS(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDerive checks the unit costs against the hand-solved equations of
// the documented figures:
//
//	rooms of 4 busy:  4·16.75 = 67.0 µs per message, u = 40,000 × 16.75 µs = 0.67
//	rooms of 4 light: 4·25.52 = 102.08 µs per message, u = 8,000 × 25.52 µs = 0.20416
//	w = (102.08 − 67) ÷ (0.67 − 0.20416) = 75.305
//	m + 4d = 67 − 75.305 × 0.33 = 42.149
//	rooms of 10 light: median(12.19, 17.82) = 15.005 µs per delivery, 150.05 per message,
//	  u = 20,000 × 15.005 µs = 0.3001: m + 10d = 150.05 − 75.305 × 0.6999 = 97.344
//	d = (97.344 − 42.149) ÷ 6 = 9.1991;  m = 42.149 − 4d = 5.3529
//	one room of 200: 200·5.63 = 1126, u = 0.2252: m + 200d_b = 1126 − 75.305 × 0.7748 = 1067.65
//	d_b = (1067.65 − 5.3529) ÷ 200 = 5.3115
func TestDerive(t *testing.T) {
	c, err := Derive(testFigures())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"wake-up", c.WakeUp, 75.305},
		{"per delivery", c.PerDelivery, 9.1991},
		{"per batched delivery", c.PerBatched, 5.3115},
		{"per message", c.PerMessage, 5.3529},
		{"split, nodes", c.SplitNode, 1.22 * 102.08},
		{"split, Redis", c.SplitRedis, 89.6},
		{"owned, nodes", c.OwnedNode, 0.29 * 102.08},
		{"owned, Redis", c.OwnedRedis, 39.6},
		{"idle bytes", c.IdleBytes, 1.26 * 1024},
	} {
		if math.Abs(tc.got-tc.want) > 0.002*math.Abs(tc.want) {
			t.Errorf("%s: %.4f, want %.4f", tc.name, tc.got, tc.want)
		}
	}
	// The model gives back what it was derived from (rooms of 10: the
	// median of the two runs). Every row sent 1 msg/s per client, so a
	// connection got as many frames a second as its room has members.
	for _, tc := range []struct {
		name              string
		msgs, size, usDel float64
	}{
		{"rooms 2500×4", 10000, 4, 16.75},
		{"cluster 500×4, one node", 2000, 4, 25.52},
		{"compression 256 B off, 200×10", 2000, 10, 15.005},
		{"oneroom n=200", 200, 200, 5.63},
	} {
		got := c.NodeCPU(tc.msgs, tc.size, tc.size, 1) * 1e6 / (tc.msgs * tc.size)
		if math.Abs(got-tc.usDel) > 0.01 {
			t.Errorf("%s: %.3f µs per delivery, measured %.2f", tc.name, got, tc.usDel)
		}
	}
}

// TestDeliveryBatches pins d(f): a writev of its own up to 10 frames a
// second per connection, the big room's cost from 200, log-linear between.
func TestDeliveryBatches(t *testing.T) {
	c := Costs{PerDelivery: 9, PerBatched: 5}
	for _, tc := range []struct{ frames, want float64 }{
		{0.01, 9}, {4, 9}, {10, 9}, {math.Sqrt(10 * 200), 7}, {200, 5}, {5000, 5},
	} {
		if got := c.Delivery(tc.frames); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%g frames/s: %.4f µs per delivery, want %.4f", tc.frames, got, tc.want)
		}
	}
}

func TestDeriveRefuses(t *testing.T) {
	figs := testFigures()
	for _, tc := range []struct {
		name   string
		change func([]Figure) []Figure
		want   string
	}{
		{"missing", func(f []Figure) []Figure { return f[1:] }, "busy_small_rooms is missing"},
		{"zero", func(f []Figure) []Figure { f[0].Value = 0; return f }, "not a measurement"},
		{"light busier than busy", func(f []Figure) []Figure { f[1].Rate = 1e5; return f }, "cannot give the cost of a wake-up"},
		{"big room dearer than small", func(f []Figure) []Figure { f[2].Value = 0.01; return f }, "do not fit the model"},
		{"rooms of 10 cheaper than rooms of 4", func(f []Figure) []Figure { f[3].Value, f[4].Value = 1, 1; return f }, "do not fit the model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Derive(tc.change(append([]Figure(nil), figs...)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestFromBenchRoomsOfTen reads rooms of 10 from a bench file's
// "compression 256 B off" rows (their median, as the doc's two runs), and
// takes the committed results' figure (the median of their two runs) when
// the file lacks them.
func TestFromBenchRoomsOfTen(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rows ...results.BenchRow) string {
		path := filepath.Join(dir, name)
		if err := results.WriteBenchFile(path, results.BenchFile{Version: "test", Machine: "test", Rows: rows}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	busy := results.BenchRow{Scenario: "rooms 2500×4", PerSecond: 40000, CPUPerDel: 16}
	with := write("with.json", busy,
		results.BenchRow{Scenario: "compression 256 B off", PerSecond: 20000, CPUPerDel: 11},
		results.BenchRow{Scenario: "#2 compression 256 B off", PerSecond: 19000, CPUPerDel: 13},
		results.BenchRow{Scenario: "compression 256 B on", PerSecond: 20000, CPUPerDel: 40})
	without := write("without.json", busy)
	// Without the row, the committed results' figure, whatever it is now.
	lab, err := LabFigures()
	if err != nil {
		t.Fatal(err)
	}
	var labMid Figure
	for _, f := range lab {
		if f.Key == KeyMidRooms {
			labMid = f
		}
	}
	for _, tc := range []struct {
		path   string
		values []float64
		rate   float64
		source string
	}{
		{with, []float64{12}, 19500, with},
		{without, []float64{labMid.Value}, labMid.Rate, "not in " + without + ", so " + LabDir + "/"},
	} {
		figs, err := FromBench(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var got []float64
		for _, f := range figs {
			if f.Key != KeyMidRooms {
				continue
			}
			got = append(got, f.Value)
			if f.Rate != tc.rate || !strings.HasPrefix(f.Source, tc.source) {
				t.Errorf("%s: rooms of 10 at %g deliveries/s from %q, want %g from %s", tc.path, f.Rate, f.Source, tc.rate, tc.source)
			}
		}
		if !slices.EqualFunc(got, tc.values, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
			t.Errorf("%s: rooms of 10 %v, want %v", tc.path, got, tc.values)
		}
	}
}
