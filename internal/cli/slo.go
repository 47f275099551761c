package cli

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/scalechat/scalechat/internal/slo"
)

// sloFlags are --slo, --junit and --slo-inconclusive, shared by the
// commands that judge runs.
type sloFlags struct {
	exprs        []string
	junit        string
	inconclusive string
	audit        bool // the objectives judge an audit, not a load test
	objs         []slo.Objective
}

func (o *sloFlags) define(f *pflag.FlagSet) {
	f.StringArrayVar(&o.exprs, "slo", nil, "service level objectives judged on each step, comma-separated or repeated: [STEP:]METRIC OP VALUE, e.g. p99<50ms, p99.9<200ms, delivery>=99.9%, connect_errors==0, cpu_per_delivery<20us, s2:p99<50ms, run:p99<50ms for the whole run, every step pooled (docs/loadtest.md#does-it-meet-our-slo); exit code 3 when one is missed, 4 when one is inconclusive")
	f.StringVar(&o.junit, "junit", "", "write the SLO verdicts to this file as JUnit XML (a testcase per SLO per step) for CI")
	f.StringVar(&o.inconclusive, "slo-inconclusive", "fail", "what an inconclusive SLO (saturated generator, figure not measured) does to the exit code: fail (exit 4) or pass")
}

// parse reads the objectives; an error is a usage error.
func (o *sloFlags) parse() error {
	if o.inconclusive != "fail" && o.inconclusive != "pass" {
		return fmt.Errorf("--slo-inconclusive must be fail or pass, not %q", o.inconclusive)
	}
	if o.junit != "" && len(o.exprs) == 0 {
		return errors.New("--junit needs --slo: it writes the SLOs' verdicts")
	}
	var err error
	if o.objs, err = slo.Parse(o.exprs...); err != nil {
		return err
	}
	for _, ob := range o.objs {
		if !o.audit && slices.Contains(slo.AuditOnly, ob.Metric) {
			return fmt.Errorf("SLO %s: only scalechat audit measures %s", ob, ob.Metric)
		}
	}
	return nil
}

// checkSteps refuses objectives naming a step the plan does not have.
// With whole, the command judges the whole run too: run: names it, and a
// step of that name would make run:p99<50ms mean two things.
func (o *sloFlags) checkSteps(names []string, whole bool) error {
	for _, ob := range o.objs {
		if whole && ob.Step == slo.RunStep {
			if contains(names, slo.RunStep) {
				return fmt.Errorf("SLO %s: a step is named %s, which --slo reserves for the whole run: rename the step", ob, slo.RunStep)
			}
			continue
		}
		if ob.Step != "" && !contains(names, ob.Step) {
			return fmt.Errorf("SLO %s names step %q, which is not in the run (steps: %s)", ob, ob.Step, strings.Join(names, ", "))
		}
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// verdict writes the JUnit file when asked and turns the results (and the
// run's own failed checks, which with --slo count as missed objectives)
// into the exit code: nil, exitMissed or exitInconclusive.
func (o *sloFlags) verdict(suite slo.Suite, checks []string) error {
	suite.Checks = checks
	if err := o.writeJUnit([]slo.Suite{suite}); err != nil {
		return err
	}
	return o.exitFor(suite.Results, checks)
}

// writeJUnit writes suites to --junit, when given.
func (o *sloFlags) writeJUnit(suites []slo.Suite) error {
	if o.junit == "" {
		return nil
	}
	if err := slo.WriteJUnitFile(o.junit, suites); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}

// exitFor turns verdicts and failed checks into the exit code's error.
func (o *sloFlags) exitFor(rs []slo.Result, checks []string) error {
	missed, inconclusive := 0, 0
	for _, r := range rs {
		switch r.Verdict {
		case slo.Missed:
			missed++
		case slo.Inconclusive:
			inconclusive++
		}
	}
	switch {
	case missed > 0 || len(checks) > 0:
		msg := fmt.Sprintf("SLO missed: %d of %d objective(s) missed", missed, len(rs))
		if len(checks) > 0 {
			msg += fmt.Sprintf(", and %d check(s) of the run failed:\n  %s", len(checks), strings.Join(checks, "\n  "))
		}
		return &exitError{code: exitMissed, err: errors.New(msg)}
	case inconclusive > 0 && o.inconclusive == "fail":
		return &exitError{code: exitInconclusive, err: fmt.Errorf("SLO inconclusive: %d of %d objective(s) could not be judged (--slo-inconclusive pass lets them pass)", inconclusive, len(rs))}
	}
	return nil
}

// suiteFor names a run's JUnit testsuite.
func suiteFor(name string, start, end time.Time, rs []slo.Result) slo.Suite {
	host, _ := os.Hostname()
	s := slo.Suite{Name: name, Timestamp: start, Hostname: host, Results: rs}
	if end.After(start) {
		s.Duration = end.Sub(start)
	}
	return s
}
