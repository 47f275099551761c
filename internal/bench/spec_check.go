//go:build linux

package bench

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/slo"
)

// check refuses a bench: section that cannot run.
func (sp *spec) check() error {
	b := &sp.bench
	if sp.sc.Name == "" {
		return errors.New("a benchmark needs a name (name: at the top)")
	}
	if len(sp.sc.Targets) > 0 {
		return errors.New("a benchmark starts its own servers (bench: servers), not targets")
	}
	steps := map[string]bool{}
	for i, s := range sp.sc.Steps {
		if steps[s.Name] {
			return fmt.Errorf("two steps are named %q", s.Name)
		}
		steps[s.Name] = true
		if err := sp.checkStep(i); err != nil {
			return fmt.Errorf("step %s: %w", s.Name, err)
		}
	}
	if err := checkFigure(b.Figure); err != nil {
		return err
	}
	for _, f := range b.Figures {
		if len(f.Of) == 0 {
			return fmt.Errorf("figures %q: of: names no metric", f.Name)
		}
		for _, m := range f.Of {
			_, mine := specMetrics[m]
			if _, theirs := slo.Metrics[m]; !mine && !theirs {
				return fmt.Errorf("figures %q: unknown metric %q", f.Name, m)
			}
		}
		if f.On != "" && !steps[f.On] {
			return fmt.Errorf("figures %q: on %q is not a step", f.Name, f.On)
		}
		if err := sp.checkSides(f, steps); err != nil {
			return fmt.Errorf("figures %q: %w", f.Name, err)
		}
		if f.As != "" && (f.As != "node_cpu_vs_one_node" || f.On == "" || len(f.Of) != 1 || f.Diff[0] != nil) {
			return fmt.Errorf("figures %q: as: %q (want node_cpu_vs_one_node, on a step, of one metric, a ratio)", f.Name, f.As)
		}
	}
	if err := sp.checkRoundTrip(); err != nil {
		return err
	}
	for name, s := range b.Setups {
		if name == "" || name == "default" {
			return fmt.Errorf("setups: %q is not a name for a setup", name)
		}
		if err := checkServers(s); err != nil {
			return fmt.Errorf("setups: %s: %w", name, err)
		}
	}
	switch {
	case b.Until != "" && b.Until != "knee":
		return fmt.Errorf("until: %q (want knee)", b.Until)
	case b.Latency != "" && b.Latency != "connect":
		return fmt.Errorf("latency: %q (want connect, or nothing for delivery)", b.Latency)
	case b.Loops != "" && b.Loops != "each":
		return fmt.Errorf("loops: %q (want each)", b.Loops)
	case b.Vary != "" && b.Vary != "room_size":
		return fmt.Errorf("vary: %q (want room_size)", b.Vary)
	case checkServers(b.Servers) != nil:
		return fmt.Errorf("servers: %w", checkServers(b.Servers))
	case b.Knee != nil && b.Knee.Reach != "" && !steps[b.Knee.Reach]:
		return fmt.Errorf("knee: reach %q is not a step (%s)", b.Knee.Reach, stepNames(sp.sc.Steps))
	}
	return nil
}

// checkFigure refuses a figure column of a metric it cannot show.
func checkFigure(metrics []string) error {
	for _, m := range metrics {
		if _, ok := specMetrics[m]; !ok {
			return fmt.Errorf("figure %q: unknown (known: %s)", m, strings.Join(metricNames(), ", "))
		}
	}
	return nil
}

// checkServers refuses a setup that cannot start, or whose scraping has
// no one /metrics to read.
func checkServers(s specServers) error {
	switch {
	case s.Place != "" && s.Place != "split" && s.Place != "first":
		return fmt.Errorf("place %q (want split or first)", s.Place)
	case s.Nodes < 0 || s.Nodes > 8:
		return fmt.Errorf("nodes %d (want 1 to 8)", s.Nodes)
	case s.Scrape < 0:
		return fmt.Errorf("scrape %s (want a positive interval)", s.Scrape.D())
	case s.Engine != "" && s.Engine != specEngineRedis && s.Engine != specEngineNATS:
		return fmt.Errorf("engine %q (want redis or nats)", s.Engine)
	case s.Redis && s.Engine == specEngineNATS:
		return errors.New("redis: true on engine nats: a setup's nodes share one engine")
	case s.Scrape > 0 && (s.clustered() || slices.Contains(s.Flags, "--metrics-addr")):
		return errors.New("scrape reads one server's /metrics: one node, without Redis or NATS and without --metrics-addr in its flags")
	}
	return nil
}

// checkSides refuses a figures: row without exactly one of ratio: and
// diff:, or whose sides name no step or one the file lacks.
func (sp *spec) checkSides(f specFigure, steps map[string]bool) error {
	ratio, diff := f.Ratio[0] != nil || f.Ratio[1] != nil, f.Diff[0] != nil || f.Diff[1] != nil
	switch {
	case ratio == diff:
		return errors.New("give ratio: [STEP, BASE] or diff: [STEP, BASE]")
	case diff && f.Max != 0:
		return errors.New("max: judges a ratio, not a diff")
	}
	for _, side := range f.sides() {
		if len(side) == 0 {
			return errors.New("a side names no step")
		}
		for _, n := range side {
			if !steps[n] {
				return fmt.Errorf("%q is not a step; the file's steps are %s", n, stepNames(sp.sc.Steps))
			}
		}
	}
	return nil
}

// checkStep refuses a step's bench: section that cannot run.
func (sp *spec) checkStep(i int) error {
	sb := sp.stepBench[sp.sc.Steps[i].Name]
	beside := func(name string) bool {
		for j, st := range sp.sc.Steps {
			if st.Name != name {
				continue
			}
			// The steps between i and j (both included but the first)
			// must each run with: the one before.
			lo, hi := min(i, j), max(i, j)
			for k := lo + 1; k <= hi; k++ {
				if sp.stepBench[sp.sc.Steps[k].Name].With != sp.sc.Steps[k-1].Name {
					return false
				}
			}
			return j != i
		}
		return false
	}
	if err := checkFigure(sb.Figure); err != nil {
		return err
	}
	if err := sp.checkEngineFigure(i); err != nil {
		return err
	}
	switch {
	case sb.With != "" && (i == 0 || sp.sc.Steps[i-1].Name != sb.With):
		return fmt.Errorf("with: %q must name the step just before", sb.With)
	case sb.During != "" && !beside(sb.During):
		return fmt.Errorf("during: %q must name a step that runs beside it (with:)", sb.During)
	case sb.Latency != "" && sb.Latency != "connect":
		return fmt.Errorf("latency: %q (want connect, or nothing for delivery)", sb.Latency)
	case sb.At != "" && (sb.At != "start" || sb.With == ""):
		return fmt.Errorf("at: %q (want start, with with:)", sb.At)
	case sb.Servers != "" && !hasSetup(sp.bench.Setups, sb.Servers):
		return fmt.Errorf("servers: %q is not one of bench: setups", sb.Servers)
	case sb.Nodes < 0 || sb.Nodes > max(sp.setup(sb.Servers).Nodes, 1):
		return fmt.Errorf("nodes: %d (its servers have %d)", sb.Nodes, max(sp.setup(sb.Servers).Nodes, 1))
	case sb.Place != "" && sb.Place != "split" && sb.Place != "first":
		return fmt.Errorf("place %q (want split or first)", sb.Place)
	case sb.Transport != "" && !slices.Contains(results.TransportNames, sb.Transport):
		return fmt.Errorf("transport %q (want %s)", sb.Transport, strings.Join(results.TransportNames, ", "))
	}
	return nil
}

// checkEngineFigure refuses a figure column of the other engine's store
// (redis_per_delivery on a step whose setup runs on NATS, nats_… on one
// on Redis), which could only show a dash.
func (sp *spec) checkEngineFigure(i int) error {
	sb := sp.stepBench[sp.sc.Steps[i].Name]
	figure := sb.Figure
	if figure == nil {
		figure = sp.bench.Figure
	}
	onNATS := sp.setup(sb.Servers).Engine == specEngineNATS
	for _, m := range figure {
		if rest, ok := strings.CutPrefix(m, "redis_"); ok && onNATS {
			return fmt.Errorf("figure %q: its servers run on NATS (engine: nats), whose figure is nats_%s", m, rest)
		}
		if strings.HasPrefix(m, "nats_") && !onNATS {
			return fmt.Errorf("figure %q: its servers do not run on NATS (engine: nats)", m)
		}
	}
	return nil
}

// setup is a setup's servers by name ("": the file's own).
func (sp *spec) setup(name string) specServers {
	if name == "" {
		return sp.bench.Servers
	}
	return sp.bench.Setups[name]
}

// stepNodes is how many nodes a step uses: its nodes:, or all of its
// setup's.
func (sp *spec) stepNodes(st loadtest.Step) int {
	sb := sp.stepBench[st.Name]
	return cmp.Or(sb.Nodes, max(sp.setup(sb.Servers).Nodes, 1))
}

// stepPlace is where a step's clients go: its place:, or its setup's.
func (sp *spec) stepPlace(st loadtest.Step) string {
	sb := sp.stepBench[st.Name]
	return cmp.Or(sb.Place, sp.setup(sb.Servers).Place)
}

func hasSetup(setups map[string]specServers, name string) bool {
	_, ok := setups[name]
	return ok
}

func metricNames() []string {
	var out []string
	for m := range specMetrics {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func stepNames(steps []loadtest.Step) string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name)
	}
	return strings.Join(out, ", ")
}
