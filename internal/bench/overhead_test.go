//go:build linux

package bench

import "testing"

// TestOverheadRow: a comparison is always a row; "–", with the reason,
// when either side's CPU held too few clock ticks to be read.
func TestOverheadRow(t *testing.T) {
	tests := []struct {
		on, off      float64
		figure, verd string
	}{
		{12.5, 10, "+2.50 µs/deliv (+25%) server CPU", ""},
		{9, 10, "-1.00 µs/deliv (-10%) server CPU", ""},
		{0, 10, "–", "n/a"},
		{10, 0, "–", "n/a"},
	}
	for _, tt := range tests {
		r := overheadRow("overhead: metrics", tt.on, tt.off, "µs/deliv", "server", "the note")
		if r.Scenario != "overhead: metrics" || r.Figure != tt.figure || r.Verdict != tt.verd || r.Note == "" {
			t.Errorf("on %v, off %v: %+v, want figure %q verdict %q and a note", tt.on, tt.off, r, tt.figure, tt.verd)
		}
	}
}
