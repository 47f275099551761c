//go:build linux

package bench

import (
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// TestRedisFigures: a cluster step's Redis CPU per delivery and what one
// Redis core would carry at that cost (1 s ÷ it), or dashes when the
// window's Redis CPU was too little to read.
func TestRedisFigures(t *testing.T) {
	for _, c := range []struct {
		name       string
		cpu        time.Duration
		deliveries int64
		want       string
	}{
		{"4 µs a delivery", 400 * time.Millisecond, 100_000, "Redis 4.00 µs/deliv; 250.0k deliveries/s a Redis core"},
		{"2 µs a delivery", 200 * time.Millisecond, 100_000, "Redis 2.00 µs/deliv; 500.0k deliveries/s a Redis core"},
		{"0.5 µs a delivery", 500 * time.Millisecond, 1_000_000, "Redis 0.50 µs/deliv; 2.00M deliveries/s a Redis core"},
		{"too little CPU to read", time.Millisecond, 100, "Redis – µs/deliv; – deliveries/s a Redis core"},
		{"nothing delivered", 400 * time.Millisecond, 0, "Redis – µs/deliv; – deliveries/s a Redis core"},
	} {
		t.Run(c.name, func(t *testing.T) {
			row := Result{Ratio: -1, cluster: &clusterFig{storeCPU: c.cpu, deliveries: c.deliveries}}
			f := specFigures(&row, results.StepMeta{}, "Redis", 0)
			if got := figureColumn([]string{"redis_per_delivery", "redis_core_deliveries"}, f, row); got != c.want {
				t.Errorf("figure %q, want %q", got, c.want)
			}
		})
	}
}
