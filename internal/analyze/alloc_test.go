//go:build !race

package analyze

import "testing"

// The race detector's instrumentation allocates on its own: these run
// without it (scripts/test.sh runs the allocation tests in a step of their
// own).

// TestAllocsParse pins docs/analyze.md and docs/architecture.md: the row
// parser allocates nothing, for a valid row or a refused one, in the
// current format and the older one.
func TestAllocsParse(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	tests := []struct {
		name  string
		parse func([]byte, *Row) error
		line  string
		ok    bool
	}{
		{"Sent", ParseRow, "s1,r0,1,0,0,Sent,1763719201000000,41", true},
		{"Received", ParseRow, "s1,r0,1,7,12,Received,1763719201000412,\r", true},
		{"Joined", ParseRow, "s1,r0,,,0,Joined,1763719200000000,", true},
		{"refused", ParseRow, "s1,r0,1,0,0,Left,1,", false},
		{"older format", ParseOldRow, "1,0,5,Received,1763719201000380", true},
		{"older format, UUID ids", ParseOldRow, "1,022ab76b-34ce-41ed-8acd-4dcb4807c3c1,3bb67e68-e26f-49c8-93fd-5df1afd7eda9,Received,1795238808000695", true},
	}
	var r Row
	for _, tt := range tests {
		line := []byte(tt.line)
		got := testing.AllocsPerRun(100, func() {
			if err := tt.parse(line, &r); (err == nil) != tt.ok {
				t.Fatalf("%s: %v", tt.name, err)
			}
		})
		if got != 0 {
			t.Errorf("%s: %v allocations per row, want 0", tt.name, got)
		}
	}
}
