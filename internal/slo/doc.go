// Package slo parses service level objectives such as "p99<50ms" or
// "s2:delivery>=99.9%", judges a run's steps against them and writes the
// verdicts as JUnit XML for CI systems.
//
// An objective is [STEP:]METRIC OP VALUE. Without STEP it applies to every
// step of the run, each judged on its own; with it, to that step only. The
// metrics and their units are listed in Metrics. A step whose load
// generator saturated is judged "inconclusive" whatever its figures say: a
// busy generator delays sends and deliveries, so neither a pass nor a miss
// would be the server's.
package slo
