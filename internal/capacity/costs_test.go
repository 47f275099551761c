package capacity

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDefaultFiguresMatchTheDoc pins every default figure to the text of
// docs/benchmarks.md it was read from, so that the doc and the table
// cannot drift apart.
func TestDefaultFiguresMatchTheDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range DefaultFigures() {
		if f.Quote == "" || f.Source == "" {
			t.Errorf("%s: no quote or no source", f.Key)
			continue
		}
		if !strings.Contains(string(doc), f.Quote) {
			t.Errorf("%s: docs/benchmarks.md no longer says %q", f.Key, f.Quote)
		}
		if v := strconv.FormatFloat(f.Value, 'f', -1, 64); !strings.Contains(f.Quote, v) {
			t.Errorf("%s: the value %s is not in its quote %q", f.Key, v, f.Quote)
		}
	}
}

// TestDerive checks the unit costs against the hand-solved equations of
// the documented figures:
//
//	rooms of 4 busy:  4·16.75 = 67.0 µs per message, u = 40,000 × 16.75 µs = 0.67
//	rooms of 4 light: 4·25.52 = 102.08 µs per message, u = 8,000 × 25.52 µs = 0.20416
//	w = (102.08 − 67) ÷ (0.67 − 0.20416) = 75.307
//	m + 4d = 67 − 75.307 × 0.33 = 42.149
//	one room of 200: 200·5.63 = 1126, u = 0.2252: m + 200d = 1126 − 75.307 × 0.7748 = 1067.65
//	d = (1067.65 − 42.149) ÷ 196 = 5.2322;  m = 42.149 − 4d = 21.220
func TestDerive(t *testing.T) {
	c, err := Derive(DefaultFigures())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"wake-up", c.WakeUp, 75.307},
		{"per delivery", c.PerDelivery, 5.2322},
		{"per message", c.PerMessage, 21.220},
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
	// The model gives back what it was derived from.
	for _, tc := range []struct {
		name              string
		msgs, size, usDel float64
	}{
		{"rooms 2500×4", 10000, 4, 16.75},
		{"cluster 500×4, one node", 2000, 4, 25.52},
		{"oneroom n=200", 200, 200, 5.63},
	} {
		got := c.NodeCPU(tc.msgs, tc.size, 1) * 1e6 / (tc.msgs * tc.size)
		if math.Abs(got-tc.usDel) > 0.01 {
			t.Errorf("%s: %.3f µs per delivery, measured %.2f", tc.name, got, tc.usDel)
		}
	}
}

func TestDeriveRefuses(t *testing.T) {
	figs := DefaultFigures()
	for _, tc := range []struct {
		name   string
		change func([]Figure) []Figure
		want   string
	}{
		{"missing", func(f []Figure) []Figure { return f[1:] }, "busy_small_rooms is missing"},
		{"zero", func(f []Figure) []Figure { f[0].Value = 0; return f }, "not a measurement"},
		{"light busier than busy", func(f []Figure) []Figure { f[1].Rate = 1e5; return f }, "cannot give the cost of a wake-up"},
		{"big room dearer than small", func(f []Figure) []Figure { f[2].Value = 0.01; return f }, "do not fit the model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Derive(tc.change(append([]Figure(nil), figs...)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
