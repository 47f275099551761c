package results

import (
	"testing"
	"time"
)

func TestCPUReadable(t *testing.T) {
	tests := []struct {
		cpu  time.Duration
		want bool
	}{
		{0, false},
		{10 * time.Millisecond, false},
		{20 * time.Millisecond, false},
		{99 * time.Millisecond, false},
		{100 * time.Millisecond, true},
		{3 * time.Second, true},
	}
	for _, tt := range tests {
		if got := CPUReadable(tt.cpu); got != tt.want {
			t.Errorf("CPUReadable(%v) = %v, want %v", tt.cpu, got, tt.want)
		}
	}
	if got, want := CPUTooFew("CPU/delivery", 20*time.Millisecond), "CPU/delivery: – (2 CPU clock ticks of 10 ms, fewer than the 10 that read it to 10 %)"; got != want {
		t.Errorf("CPUTooFew = %q, want %q", got, want)
	}
}
