package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
)

// checkAudit refuses objectives an audit cannot judge: a metric it does
// not measure (latency, server CPU) would only ever be inconclusive.
func (o *sloFlags) checkAudit() error {
	if err := o.checkSteps([]string{slo.AuditStep}, false); err != nil {
		return err
	}
	for _, ob := range o.objs {
		if !slices.Contains(slo.AuditMetrics, ob.Metric) {
			return fmt.Errorf("SLO %s: audit does not measure %s (it measures %s)", ob, ob.Metric, strings.Join(slo.AuditMetrics, ", "))
		}
	}
	return nil
}

// judgeAudit records the verdicts of --slo in res, for audit.json.
func (o *sloFlags) judgeAudit(res *results.Audit) {
	if len(o.objs) > 0 {
		res.SLO = slo.Evaluate(o.objs, []slo.Step{slo.FromAudit(res)})
	}
}

// auditExit prints the SLO verdicts and returns the audit's exit error.
// Without --slo a broken guarantee exits 1, as audit always has; with
// --slo the broken guarantees are failed checks of the run, as loadtest's
// are, and exit 3 with the missed objectives: measured, and the answer is
// no, apart from an audit that could not run (1).
func (o *sloFlags) auditExit(w io.Writer, res *results.Audit, hooksBroken bool) error {
	var broken []string
	for _, g := range res.Guarantees {
		if !g.Held {
			broken = append(broken, "guarantee broken: "+g.Name+" ("+g.What+")")
		}
	}
	if hooksBroken {
		broken = append(broken, "a webhook guarantee was broken (see the verdict above)")
	}
	if len(o.objs) > 0 {
		slo.Print(w, res.SLO)
		return o.verdict(suiteFor("audit", res.Started, res.Ended, res.SLO), broken)
	}
	switch {
	case res.Broken:
		return &exitError{code: exitFailed, err: errors.New("a delivery guarantee was broken (see the verdict above)")}
	case hooksBroken:
		return &exitError{code: exitFailed, err: errors.New("a webhook guarantee was broken (see the verdict above)")}
	}
	return nil
}
