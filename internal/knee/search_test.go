package knee

import (
	"context"
	"errors"
	"math"
	"testing"
)

// server models a server whose objectives hold up to knee, and a generator
// that saturates on loads in [saturate, saturate+5) (0: never).
func server(knee, saturate float64, round bool, loads *[]float64) Prober {
	return func(_ context.Context, load float64) (float64, Outcome, error) {
		if round {
			load = math.Round(load)
		}
		*loads = append(*loads, load)
		switch {
		case saturate > 0 && load >= saturate && load < saturate+5:
			return load, Saturated, nil
		case load > knee:
			return load, Fail, nil
		}
		return load, Pass, nil
	}
}

func TestSearch(t *testing.T) {
	tests := []struct {
		name      string
		opt       Options
		knee, sat float64
		round     bool
		want      Result
		loads     []float64
	}{
		{"rate limit 20 from 8", Options{8, 1000, 2, 0.1, 12}, 20, 0, false,
			Result{Good: 20, Bad: 22, Stop: Found, Probes: 6}, []float64{8, 16, 32, 24, 20, 22}},
		{"whole clients", Options{10, 10000, 2, 0.01, 20}, 100, 0, true,
			Result{Good: 100, Bad: 101, Stop: Found, Probes: 12}, []float64{10, 20, 40, 80, 160, 120, 100, 110, 105, 103, 102, 101}},
		{"first probe misses", Options{50, 1000, 2, 0.1, 12}, 20, 0, false,
			Result{Bad: 50, Stop: FirstFailed, Probes: 1}, []float64{50}},
		{"never misses", Options{100, 500, 2, 0.1, 12}, 1e9, 0, false,
			Result{Good: 500, Stop: AboveMax, Probes: 4}, []float64{100, 200, 400, 500}},
		{"generator first", Options{8, 1000, 2, 0.1, 12}, 100, 30, false,
			Result{Good: 16, Stop: Generator, Probes: 3}, []float64{8, 16, 32}},
		{"generator while bisecting", Options{8, 1000, 2, 0.1, 12}, 20, 24, false,
			Result{Good: 16, Bad: 32, Stop: Generator, Probes: 4}, []float64{8, 16, 32, 24}},
		{"out of probes", Options{1, 1000, 2, 0.01, 5}, 20, 0, false,
			Result{Good: 16, Stop: OutOfProbes, Probes: 5}, []float64{1, 2, 4, 8, 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var loads []float64
			got, err := Search(context.Background(), tt.opt, server(tt.knee, tt.sat, tt.round, &loads))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if len(loads) != len(tt.loads) {
				t.Fatalf("probes %v, want %v", loads, tt.loads)
			}
			for i := range loads {
				if loads[i] != tt.loads[i] {
					t.Fatalf("probes %v, want %v", loads, tt.loads)
				}
			}
		})
	}
}

func TestSearchErrors(t *testing.T) {
	if _, err := Search(context.Background(), Options{0, 10, 2, 0.1, 5}, nil); err == nil {
		t.Error("a search from 0 was accepted")
	}
	boom := errors.New("boom")
	_, err := Search(context.Background(), Options{1, 10, 2, 0.1, 5}, func(context.Context, float64) (float64, Outcome, error) {
		return 0, Pass, boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want boom", err)
	}
}
