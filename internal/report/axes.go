package report

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// logAxis puts a on a log scale that holds lo … hi (both > 0) and reaches
// out to whole decades, so that both ends carry a labelled tick.
func logAxis(a *plot.Axis, lo, hi float64) {
	a.Scale = plot.LogScale{}
	a.Tick.Marker = decadeTicks{}
	a.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
	a.Max = math.Pow10(int(math.Ceil(math.Log10(hi))))
	if a.Max <= a.Min {
		a.Max = a.Min * 10
	}
}

// decadeTicks marks a log axis: a labelled tick at every decade, a short
// one at 2 … 9 times each. An axis of at most two decades also labels 2
// and 5 times each, so that it has more than two or three numbers. (gonum's
// LogTicks labels decades too, but from int(log10(lo)), which rounds
// towards zero: below 1 it starts a decade too high.)
type decadeTicks struct{}

// Ticks returns the ticks between lo and hi.
func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	first := int(math.Floor(math.Log10(lo) + 1e-9))
	last := int(math.Floor(math.Log10(hi) + 1e-9))
	few := last-first <= 2
	var ticks []plot.Tick
	for e := first; e <= last; e++ {
		dec := math.Pow10(e)
		for m := 1; m < 10; m++ {
			v := dec * float64(m)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (few && (m == 2 || m == 5)) {
				t.Label = tickLabel(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// tickLabel writes a tick's value without an exponent: 0.001, 20, 1000,
// then 100k, 1M.
func tickLabel(v float64) string {
	if v >= 1e5 {
		return siCount(v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
