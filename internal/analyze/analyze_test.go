package analyze

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// goldenRun is a hand-made run. T = 1000000000000000 µs; times below are
// offsets from T (step s1) and from T2 = T + 1 s (step s2).
//
// Step s1, room a: clients 1, 2, 3 join at +0, +1, +2, client 4 at +1500,
// client 7 at +2000 exactly, client 8 at +2001. Room b: clients 5, 6.
//
//	message (1,1) due +1000: members 1,2,3 → expected 3; received by 1,2,3
//	                         after 100, 200, 300 µs.
//	message (5,1) due +1500 in b: expected 2; received after 700, 800 µs.
//	message (1,2) due +2000: members 1,2,3,4,7 (7 joined at the due time,
//	                         8 after it) → expected 5; received by 1, 2, 4
//	                         after 400, 500, 600 µs and by 8 (not expected,
//	                         still received) after 900 µs → lost 5−4 = 1.
//	a Received of (9,9), never sent: 1 orphan.
//
// s1: sent 3, expected 3+2+5 = 10, received 9, lost 1, orphans 1, clients 8,
// rooms 2, latencies 100, 200, …, 900 µs.
//
// Step s2, room c: clients 11, 12 join at +0, +1.
//
//	message (11,1) due +100: received by 11 after 1000 µs, 12 after 3000 µs.
//	message (12,1) due +200: received by 12 after 2000 µs; 11 never → lost 1.
//
// s2: sent 2, expected 4, received 3, lost 1, latencies 1, 2, 3 ms.
//
// Line 17 is malformed, and the file ends with a partial line.
const goldenRun = `step,room,message_id,sender_id,client_id,event,unix_us,lag_us
s1,a,,,1,Joined,1000000000000000,
s1,a,,,2,Joined,1000000000000001,
s1,a,,,3,Joined,1000000000000002,
s1,b,,,5,Joined,1000000000000010,
s1,b,,,6,Joined,1000000000000011,
s1,a,1,1,1,Sent,1000000000001000,5
s1,a,1,1,1,Received,1000000000001100,
s1,a,1,1,2,Received,1000000000001200,
s1,a,1,1,3,Received,1000000000001300,
s1,a,,,4,Joined,1000000000001500,
s1,b,1,5,5,Sent,1000000000001500,0
s1,a,,,7,Joined,1000000000002000,
s1,a,2,1,1,Sent,1000000000002000,3
s1,a,,,8,Joined,1000000000002001,
s1,b,1,5,5,Received,1000000000002200,
s1,a,3,1,1,Sent,notanumber,
s1,b,1,5,6,Received,1000000000002300,
s1,a,2,1,1,Received,1000000000002400,
s1,a,2,1,2,Received,1000000000002500,
s1,a,2,1,4,Received,1000000000002600,
s1,a,9,9,2,Received,1000000000002700,
s1,a,2,1,8,Received,1000000000002900,
s2,c,,,11,Joined,1000000001000000,
s2,c,,,12,Joined,1000000001000001,
s2,c,1,11,11,Sent,1000000001000100,1
s2,c,1,12,12,Sent,1000000001000200,1
s2,c,1,11,11,Received,1000000001001100,
s2,c,1,12,12,Received,1000000001002200,
s2,c,1,11,12,Received,1000000001003100,
s2,c,1,12,11,Rece`

// want is a step's expected figures, latencies in µs.
type want struct {
	clients, rooms, sent, expected, received, lost, orphans int64
	pct                                                     [12]int64 // p10 … p90, p95, p99, p99.9
	min, max                                                int64
	mean, std                                               float64
}

func checkStep(t *testing.T, got results.StepStats, w want) {
	t.Helper()
	counts := [][3]any{
		{"clients", got.Clients, w.clients}, {"rooms", got.Rooms, w.rooms}, {"sent", got.Sent, w.sent},
		{"expected", got.Expected, w.expected}, {"received", got.Received, w.received},
		{"lost", got.Lost, w.lost}, {"orphans", got.Orphans, w.orphans},
	}
	for _, c := range counts {
		if c[1] != c[2] {
			t.Errorf("step %s: %s = %v, want %v", got.Step, c[0], c[1], c[2])
		}
	}
	if w.expected > 0 {
		if r := float64(w.received) / float64(w.expected); math.Abs(got.DeliveryRatio-r) > 1e-12 {
			t.Errorf("step %s: delivery ratio = %v, want %v", got.Step, got.DeliveryRatio, r)
		}
	}
	for i, p := range got.Percentiles() {
		if p.Ms != float64(w.pct[i])/1000 {
			t.Errorf("step %s: %s = %v ms, want %v ms", got.Step, p.Name, p.Ms, float64(w.pct[i])/1000)
		}
	}
	if got.Min != float64(w.min)/1000 || got.Max != float64(w.max)/1000 {
		t.Errorf("step %s: min, max = %v, %v ms, want %v, %v µs", got.Step, got.Min, got.Max, w.min, w.max)
	}
	if math.Abs(got.Mean-w.mean/1000) > 1e-9 || math.Abs(got.Stddev-w.std/1000) > 1e-9 {
		t.Errorf("step %s: mean, stddev = %v, %v ms, want %v, %v µs", got.Step, got.Mean, got.Stddev, w.mean, w.std)
	}
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runFiles(t testing.TB, opts Options, paths ...string) *Result {
	t.Helper()
	for _, p := range paths {
		opts.Inputs = append(opts.Inputs, Input{Path: p})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

var (
	// s1: nine latencies 100 … 900 µs. Nearest rank ⌈q·9⌉: p10 → 1st,
	// p20 → 2nd, p30 → 3rd, p40 → 4th, p50 → 5th, p60 → 6th, p70 → 7th,
	// p80 → 8th, p90 and above → 9th. Mean 500; population variance
	// 100²·(9²−1)/12.
	wantS1 = want{clients: 8, rooms: 2, sent: 3, expected: 10, received: 9, lost: 1, orphans: 1,
		pct: [12]int64{100, 200, 300, 400, 500, 600, 700, 800, 900, 900, 900, 900},
		min: 100, max: 900, mean: 500, std: 100 * math.Sqrt(80.0/12)}
	// s2: 1000, 2000, 3000 µs: ⌈q·3⌉ is 1 for q ≤ 1/3, 2 up to 2/3, then 3.
	wantS2 = want{clients: 2, rooms: 1, sent: 2, expected: 4, received: 3, lost: 1,
		pct: [12]int64{1000, 1000, 1000, 2000, 2000, 2000, 3000, 3000, 3000, 3000, 3000, 3000},
		min: 1000, max: 3000, mean: 2000, std: math.Sqrt(2e6 / 3)}
	// Both: 100 … 900, 1000, 2000, 3000 (12 values): ⌈q·12⌉ = 2, 3, 4, 5,
	// 6, 8, 9, 10, 11, 12, 12, 12. Σx = 10500, Σx² = 16 850 000.
	wantAll = want{clients: 10, rooms: 3, sent: 5, expected: 14, received: 12, lost: 2, orphans: 1,
		pct: [12]int64{200, 300, 400, 500, 600, 800, 900, 1000, 2000, 3000, 3000, 3000},
		min: 100, max: 3000, mean: 875, std: math.Sqrt(16850000.0/12 - 875*875)}
)

func TestGolden(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "run.csv", goldenRun)
	for _, parsers := range []int{1, 2, 3} {
		res := runFiles(t, Options{Workers: parsers}, p)
		if len(res.Steps) != 2 || res.Steps[0].Step != "s1" || res.Steps[1].Step != "s2" {
			t.Fatalf("parsers %d: steps = %+v", parsers, res.Steps)
		}
		checkStep(t, res.Steps[0], wantS1)
		checkStep(t, res.Steps[1], wantS2)
		checkStep(t, res.Overall, wantAll)
		if res.Malformed != 1 || len(res.Errors) != 1 || !strings.HasPrefix(res.Errors[0], p+":17: bad unix_us") {
			t.Errorf("malformed = %d %q, want 1 at %s:17", res.Malformed, res.Errors, p)
		}
		if len(res.Truncated) != 1 || res.Truncated[0] != p {
			t.Errorf("truncated = %q, want [%s]", res.Truncated, p)
		}
		if res.Rows != 28 {
			t.Errorf("rows = %d, want 28", res.Rows)
		}
	}
}
