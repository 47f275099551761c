package analyze

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write testdata/legacy anew")

// legacyWant is what the generator of testdata/legacy knows it wrote, per
// step: the oracle of TestLegacyFiles, computed while writing, not by analyze.
type legacyWant struct {
	Step     string  `json:"step"`
	Clients  int64   `json:"clients"`
	Sent     int64   `json:"sent"`
	Expected int64   `json:"expected"`
	Received int64   `json:"received"`
	Lost     int64   `json:"lost"`
	MaxMs    float64 `json:"max_ms"`
	MeanMs   float64 `json:"mean_ms"`
}

type legacyGolden struct {
	Steps     []legacyWant `json:"steps"`
	Ignored   int64        `json:"ignored"`
	Malformed int64        `json:"malformed"`
}

// writeLegacy writes files as the original load-test client wrote them: no
// header, UUID sender and client ids (uuid.New().String()), one file per
// step, rows in the order the clients logged them, the joined frame of a
// server that sends one logged as "0,,<client>,Received,<t>", and in step 2
// a client killed mid-run: its rows stop, the file ends in the middle of a
// row, and the deliveries to it of later messages are lost.
func writeLegacy(dir string) (legacyGolden, error) {
	rng := rand.New(rand.NewPCG(7, 13))
	uuid := func() string {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	type row struct {
		t    int64
		line string
	}
	var g legacyGolden
	var steps strings.Builder
	t0 := int64(1795238808000000)
	for s, cfg := range []struct{ rooms, size, msgs int }{{2, 3, 4}, {3, 4, 5}} {
		var rows []row
		w := legacyWant{Step: fmt.Sprintf("step %d", s+1)}
		killed, killAt := "", t0+2_500_000 // step 2: the first client dies 2.5 s in
		var sumMs float64
		for r := 0; r < cfg.rooms; r++ {
			ids := make([]string, cfg.size)
			for i := range ids {
				ids[i] = uuid()
				rows = append(rows, row{t0 - 1000, "0,," + ids[i] + ",Received," + fmt.Sprint(t0-1000)})
				g.Ignored++
			}
			w.Clients += int64(cfg.size)
			if s == 1 && r == 0 {
				killed = ids[0]
			}
			for i, sender := range ids {
				for m := 1; m <= cfg.msgs; m++ {
					due := t0 + int64(m)*1_000_000 + int64(i)*1000
					if sender == killed && due >= killAt {
						break
					}
					rows = append(rows, row{due, fmt.Sprintf("%d,%s,%s,Sent,%d", m, sender, sender, due)})
					w.Sent++
					w.Expected += int64(cfg.size)
					for _, to := range ids {
						lat := int64(200 + rng.IntN(5000))
						if to == killed && due+lat >= killAt {
							w.Lost++
							continue
						}
						rows = append(rows, row{due + lat, fmt.Sprintf("%d,%s,%s,Received,%d", m, sender, to, due+lat)})
						w.Received++
						sumMs += float64(lat) / 1000
						w.MaxMs = max(w.MaxMs, float64(lat)/1000)
					}
				}
			}
		}
		w.MeanMs = sumMs / float64(w.Received)
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].t < rows[j].t })
		var b strings.Builder
		for _, r := range rows {
			b.WriteString(r.line + "\n")
		}
		data := b.String()
		if s == 1 {
			data += "3," + killed + "," + killed[:7] // the process was killed while writing
		}
		name := fmt.Sprintf("step%d.csv", s+1)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return g, err
		}
		fmt.Fprintf(&steps, "%d,%d,%s\n", cfg.rooms, cfg.size, name)
		g.Steps = append(g.Steps, w)
	}
	if err := os.WriteFile(filepath.Join(dir, "steps.txt"), []byte(steps.String()), 0o644); err != nil {
		return g, err
	}
	return g, nil
}

// TestLegacyFiles analyses files of the original client's format (UUID ids,
// no header, one file per step, a killed client) checked in under
// testdata/legacy, against what their generator knew it wrote.
func TestLegacyFiles(t *testing.T) {
	dir := filepath.Join("testdata", "legacy")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		g, err := writeLegacy(dir)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(g, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "golden.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g legacyGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	inputs, err := ReadSteps(filepath.Join(dir, "steps.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, parsers := range []int{1, 3} {
		res := runInputs(t, Options{Inputs: inputs, Workers: parsers})
		if err := res.Check(0.01); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if res.Ignored != g.Ignored || res.Malformed != g.Malformed {
			t.Errorf("parsers %d: ignored %d malformed %d, want %d and %d", parsers, res.Ignored, res.Malformed, g.Ignored, g.Malformed)
		}
		if len(res.Truncated) != 1 || !strings.HasSuffix(res.Truncated[0], "step2.csv") {
			t.Errorf("truncated = %q, want step2.csv", res.Truncated)
		}
		if len(res.Steps) != len(g.Steps) {
			t.Fatalf("parsers %d: %d steps, want %d", parsers, len(res.Steps), len(g.Steps))
		}
		for i, w := range g.Steps {
			s := res.Steps[i]
			got := legacyWant{Step: w.Step, Clients: s.Clients, Sent: s.Sent, Expected: s.Expected, Received: s.Received,
				Lost: s.Lost, MaxMs: s.Max, MeanMs: s.Mean}
			if got.Clients != w.Clients || got.Sent != w.Sent || got.Expected != w.Expected || got.Received != w.Received ||
				got.Lost != w.Lost || got.MaxMs != w.MaxMs || fmt.Sprintf("%.6f", got.MeanMs) != fmt.Sprintf("%.6f", w.MeanMs) {
				t.Errorf("parsers %d, step %d: got %+v, want %+v", parsers, i+1, got, w)
			}
		}
	}
}

func runInputs(t *testing.T, opts Options) *Result {
	t.Helper()
	return runFiles(t, opts)
}
