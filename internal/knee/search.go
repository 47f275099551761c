// Package knee finds the highest load a server carries within its service
// level objectives: it grows the load geometrically until a probe misses
// them, then bisects between the last load that met them and the first
// that did not, and names the first resource that ran out at the knee.
// It knows nothing of how a probe runs: internal/cli runs each as a
// load test step.
package knee

import (
	"context"
	"fmt"
)

// Outcome is what one probe says.
type Outcome int

// Outcomes of a probe.
const (
	Pass      Outcome = iota // every objective met
	Fail                     // an objective missed, or a check of the run failed
	Saturated                // the load generator saturated: the probe says nothing of the server
)

// Prober runs one probe at load and returns the load it really ran (a
// dimension counted in whole clients rounds it) and its outcome.
type Prober func(ctx context.Context, load float64) (ran float64, o Outcome, err error)

// Options bound a search.
type Options struct {
	Start      float64 // the first load
	Max        float64 // the load the search never exceeds
	Factor     float64 // growth between probes before the first miss (e.g. 2)
	Resolution float64 // stop bisecting once (bad-good)/good is at most this (e.g. 0.1)
	MaxProbes  int     // at most this many probes
}

// Stop says why a search ended.
type Stop string

// Why a search ends.
const (
	Found       Stop = "found"        // bisected to the resolution: the knee is Good
	Generator   Stop = "generator"    // a probe saturated the generator: the server's knee is above Good
	AboveMax    Stop = "above-max"    // every load up to Max met the objectives
	FirstFailed Stop = "first-failed" // the first load already missed them
	OutOfProbes Stop = "out-of-probes"
)

// Result is where a search ended: Good is the highest load that met the
// objectives (0 when none did), Bad the lowest that missed them (0 when
// none did).
type Result struct {
	Good, Bad float64
	Stop      Stop
	Probes    int
}

// Search runs probes until it can say where the knee is.
func Search(ctx context.Context, opt Options, probe Prober) (Result, error) {
	if opt.Start <= 0 || opt.Max < opt.Start || opt.Factor <= 1 || opt.Resolution <= 0 || opt.MaxProbes < 1 {
		return Result{}, fmt.Errorf("knee search: start %g, max %g, factor %g, resolution %g, probes %d do not make a search",
			opt.Start, opt.Max, opt.Factor, opt.Resolution, opt.MaxProbes)
	}
	var r Result
	run := func(load float64) (float64, Outcome, error) {
		r.Probes++
		return probe(ctx, load)
	}
	// Grow until a probe misses.
	for load := opt.Start; ; {
		ran, o, err := run(load)
		if err != nil {
			return r, err
		}
		switch o {
		case Saturated:
			r.Stop = Generator
			return r, nil
		case Fail:
			r.Bad = ran
		default:
			r.Good = ran
		}
		if r.Bad > 0 {
			break
		}
		if ran >= opt.Max {
			r.Stop = AboveMax
			return r, nil
		}
		if r.Probes >= opt.MaxProbes {
			r.Stop = OutOfProbes
			return r, nil
		}
		load = min(ran*opt.Factor, opt.Max)
	}
	if r.Good == 0 {
		r.Stop = FirstFailed
		return r, nil
	}
	// Bisect between the last pass and the first miss.
	for (r.Bad-r.Good)/r.Good > opt.Resolution {
		if r.Probes >= opt.MaxProbes {
			r.Stop = OutOfProbes
			return r, nil
		}
		ran, o, err := run((r.Good + r.Bad) / 2)
		if err != nil {
			return r, err
		}
		switch {
		case o == Saturated:
			r.Stop = Generator
			return r, nil
		case ran <= r.Good || ran >= r.Bad:
			// The dimension cannot be cut finer (whole clients).
			r.Stop = Found
			return r, nil
		case o == Fail:
			r.Bad = ran
		default:
			r.Good = ran
		}
	}
	r.Stop = Found
	return r, nil
}
