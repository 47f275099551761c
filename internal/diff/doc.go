// Package diff answers "did this change make it slower?": it compares load
// test runs A (the baseline) and B step by step (matched by name), for
// latency p50, p90, p99 and p99.9, the delivery ratio and, when both runs
// scraped the server, server CPU per delivery; it puts a confidence
// interval around each change and gives a verdict: regressed, improved or
// same. `scalechat diff` is its command; docs/loadtest.md describes it.
//
// The interval is a bootstrap. Each run's step is cut into windows of one
// second by the messages' due time (analyze.Options.Windows): what they
// were owed, what they got, and a histogram of their latencies (within
// 0.8 %). A resample draws, per side, as many runs as the side has, with
// replacement, then within each drawn run as many windows as it has, with
// replacement, and pools them; the change is B's figure against A's (%
// for latencies and CPU, percentage points for delivery). The interval is
// the central 95 % of 1000 such changes, drawn from a fixed seed so that a
// diff prints the same every time. Drawing whole windows keeps the bursts
// and stalls of a run together; drawing runs first makes the run-to-run
// spread widen the interval when a side has several runs. With one run per
// side only the spread within the runs is known: give several runs per
// side on noisy machines.
//
// A metric regressed when its whole interval lies beyond its threshold on
// the side where it gets worse (above +t % for latencies and CPU, below
// −t pp for delivery), improved when the whole interval lies beyond the
// threshold on the other side, and is the same otherwise: within the noise,
// or too small to matter. The thresholds are --fail-on's, or by default
// 10 % for latencies and CPU and 0 pp for delivery (any loss beyond the
// noise). The figures of A and B are those of the pooled windows of all a
// side's runs.
package diff
