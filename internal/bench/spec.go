//go:build linux

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/slo"
	"github.com/scalechat/scalechat/scenarios"
)

// A benchmark as data: a scenario file (scalechat loadtest's steps, with
// the objectives under slo:) whose bench: section says how scalechat bench
// runs it and what its rows show. The named scenarios that are files live
// in scenarios/ (embedded); a user's file runs the same way. See
// docs/benchmarks.md, "Adding a benchmark".

// spec is a parsed benchmark file.
type spec struct {
	file      string // where it came from, for messages
	loops     int    // a loops: each run's server size; 0: not one
	tag       string // names its files in the work folder; "": the file's name
	sc        *loadtest.Scenario
	objs      []slo.Objective
	bench     specBench
	stepBench map[string]specStepBench // a step's bench: section, by its name
}

// specBench is a file's bench: section.
type specBench struct {
	// About is the scenario's line in bench --help.
	About   string      `yaml:"about"`
	Servers specServers `yaml:"servers"`
	// Row names a step's row; {rooms}, {room_size}, {clients},
	// {rooms_per_client}, {senders}, {msg_size} and {name} are the step's.
	// Default: the file's name and the step's.
	Row string `yaml:"row"`
	// Latency "connect" puts the connect times (due → joined) in the
	// p50/p99/max columns, for steps that send nothing.
	Latency string `yaml:"latency"`
	// Figure are the metrics of the figure column (specMetrics).
	Figure []string `yaml:"figure"`
	// Note is a row's note, with the placeholders of Row and the step's
	// measures {joined}, {sent}, {deliveries}, {rss_before}, {rss_held}.
	Note string `yaml:"note"`
	// Until "knee" stops the steps after the first that misses an
	// objective or whose generator saturated.
	Until string `yaml:"until"`
	// SmokeSteps, when positive, is how many steps --smoke runs.
	SmokeSteps int          `yaml:"smoke_steps"`
	Knee       *specKnee    `yaml:"knee"`
	Figures    []specFigure `yaml:"figures"`
	// Loops "each" runs the steps once per server size, 1, 2, 4 … N
	// event loops (N: the server CPUs), each server pinned to its first
	// k CPUs with --loops k and every step's rooms × k.
	Loops string `yaml:"loops"`
	// Vary "room_size" lets the run set the rooms' members (bench
	// --scaling-room-size): every step's rooms resized to keep its
	// deliveries a second (resizeRooms).
	Vary string `yaml:"vary"`
	// Setups are more server setups by name, besides Servers, for the
	// steps whose bench: servers: names one (two servers side by side).
	Setups map[string]specServers `yaml:"setups"`
}

// specStepBench is a step's bench: section.
type specStepBench struct {
	// Row, Latency, Note and Figure are the file's, for this step.
	Row     string   `yaml:"row"`
	Latency string   `yaml:"latency"`
	Note    string   `yaml:"note"`
	Figure  []string `yaml:"figure"`
	// With names the step before: this one starts once that one sends,
	// After later (at most a second with --smoke), and both run at once.
	With  string            `yaml:"with"`
	After loadtest.Duration `yaml:"after"`
	// During names the step beside this one: this row's delivery and
	// latency are those of the messages due while that step connected.
	During string `yaml:"during"`
	// Args are more scalechat loadtest flags for this step's generators
	// (--compression).
	Args []string `yaml:"args"`
	// Servers names the setup (bench: setups) this step runs against;
	// "": the file's servers.
	Servers string `yaml:"servers"`
	// At "start" starts a step with: the one before at the same moment
	// as that one, not once it sends.
	At string `yaml:"at"`
	// Nodes, on a cluster, is how many of its nodes this step uses (the
	// first ones, started when missing); Place is the setup's place for
	// this step.
	Nodes int    `yaml:"nodes"`
	Place string `yaml:"place"`
	// NodeRows adds, for a step split over nodes, a row of its same-node
	// deliveries and one of its cross-node deliveries.
	NodeRows bool `yaml:"node_rows"`
}

// specServers are the servers a benchmark starts: this binary's serve,
// nodes of them (a cluster on one redis-server when more than one, or
// with redis), each with flags. Place "split" (a cluster's default) runs
// one generator per node, shard i/n on node i; "first" puts every client
// on the first node. Fresh servers are started for each group of steps
// and stopped after it (others live from their first step to the file's
// end); Scrape reads the one server's /metrics this often while a step
// runs, as a monitoring system would.
type specServers struct {
	Nodes  int               `yaml:"nodes"`
	Redis  bool              `yaml:"redis"`
	Flags  []string          `yaml:"flags"`
	Place  string            `yaml:"place"`
	Fresh  bool              `yaml:"fresh"`
	Scrape loadtest.Duration `yaml:"scrape"`
}

// specKnee is the row that sums up a sweep: the last step that met every
// objective, named Row, its figure Figure (the placeholders of bench.Row
// and {deliveries_per_s}); with Reach, it must be that step or a later one.
type specKnee struct {
	Row    string `yaml:"row"`
	Figure string `yaml:"figure"`
	Reach  string `yaml:"reach"`
}

// specFigure is a derived row: the ratio of each metric Of between two
// steps (Ratio: [step, base step]), each at most Max when given, or their
// difference (Diff: [step, base step]); each side may be several steps,
// whose mean it takes (runs in turn, against a machine's noise). With On,
// not a row of its own but the figure, target and verdict of step On's
// row. Note is the row's note.
type specFigure struct {
	Name  string      `yaml:"name"`
	Ratio [2]nameList `yaml:"ratio"`
	Diff  [2]nameList `yaml:"diff"`
	Of    nameList    `yaml:"of"`
	Max   float64     `yaml:"max"`
	On    string      `yaml:"on"`
	Note  string      `yaml:"note"`
	// As names the results file's field the ratio also fills, on step
	// On's row: node_cpu_vs_one_node (scalechat plan reads it).
	As string `yaml:"as"`
}

// sides are the figure's two sides, whichever of ratio: and diff: it has.
func (f specFigure) sides() [2]nameList {
	if f.Diff[0] != nil || f.Diff[1] != nil {
		return f.Diff
	}
	return f.Ratio
}

// nameList is one name (of: p99) or several (of: [p99, max]).
type nameList []string

// UnmarshalYAML takes a name or a list of them.
func (m *nameList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*m = nameList{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*m = list
	return nil
}

// specMetrics are the metrics a figure column or a figures: row can name,
// beyond the objectives' (slo.Metrics), with how the figure column shows
// them.
var specMetrics = map[string]string{
	"cpu_per_delivery":   "%.2f µs/deliv",
	"rss_per_conn":       "%s/conn",
	"generator_cores":    "generator %.2f cores",
	"redis_per_delivery": "Redis %.2f µs/deliv",
	"unavailable":        "%.0f unavailable",
	"deliveries_per_s":   "%s deliveries/s",
	"bytes_per_delivery": "%.0f B/deliv out",
	// µs of generator CPU per message it recorded (sent + received),
	// over the sending window: what the generator's own work costs.
	"generator_per_message": "gen %.2f µs/msg",
}

// parseSpec reads a benchmark file: a scenario file with a bench:
// section.
func parseSpec(name string, b []byte) (*spec, error) {
	sc, err := loadtest.ParseScenario(b, loadtest.DefaultStep())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	sp := &spec{file: name, sc: sc}
	if sc.Bench.IsZero() {
		return nil, fmt.Errorf("%s has no bench: section", name)
	}
	if err := loadtest.DecodeStrict(&sc.Bench, &sp.bench); err != nil {
		return nil, fmt.Errorf("%s: bench: %w", name, err)
	}
	if sp.objs, err = slo.Parse(sc.SLO...); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	sp.stepBench = map[string]specStepBench{}
	for i, n := range sc.StepBench {
		var sb specStepBench
		if n != nil {
			if err := loadtest.DecodeStrict(n, &sb); err != nil {
				return nil, fmt.Errorf("%s: step %s: bench: %w", name, sc.Steps[i].Name, err)
			}
		}
		sp.stepBench[sc.Steps[i].Name] = sb
	}
	if err := sp.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return sp, nil
}

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
	case s.Scrape > 0 && (s.Nodes > 1 || s.Redis || slices.Contains(s.Flags, "--metrics-addr")):
		return errors.New("scrape reads one server's /metrics: one node, without Redis and without --metrics-addr in its flags")
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

// IsSpec reports whether the scenario file at path is a benchmark (has a
// bench: section), which scalechat bench runs as its named scenarios; the
// error says why the file, or its bench: section, cannot run.
func IsSpec(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("read scenario: %w", err)
	}
	sc, err := loadtest.ParseScenario(b, loadtest.DefaultStep())
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if sc.Bench.IsZero() {
		return false, nil
	}
	_, err = parseSpec(path, b)
	return true, err
}

// loadSpecFile reads a user's benchmark file.
func loadSpecFile(file string) (*spec, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return parseSpec(file, b)
}

// shippedSpecs are the benchmark files of scenarios/ (those with a bench:
// section), by file name.
func shippedSpecs(fsys fs.FS) ([]*spec, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*spec
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		name := path.Join("scenarios", n)
		sc, err := loadtest.ParseScenario(b, loadtest.DefaultStep())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if sc.Bench.IsZero() {
			continue // a load test's file, not a benchmark
		}
		sp, err := parseSpec(name, b)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

// specScenario is a benchmark file as a named scenario.
func specScenario(sp *spec) Scenario {
	about := sp.bench.About
	if about == "" {
		about = "scenario file " + sp.file
	}
	return Scenario{Name: sp.sc.Name, About: about, File: sp.file, medians: sp.medians,
		run: func(ctx context.Context, r *runner) ([]Result, error) { return r.runSpec(ctx, sp) }}
}

// goScenarios are the scenarios that are still Go code (see each for why).
func goScenarios() []Scenario {
	return []Scenario{
		{Name: "transports", About: "100 … 1,000 clients send one message each over WebSocket, long polling, polling: errors, p99, CPU, bytes", run: runTransports},
	}
}

// allScenarios are the benchmark files of scenarios/, then the Go
// scenarios; an embedded file that does not parse is an error (a test
// keeps them parsing).
func allScenarios() ([]Scenario, error) {
	specs, err := shippedSpecs(scenarios.Files())
	var out []Scenario
	for _, sp := range specs {
		out = append(out, specScenario(sp))
	}
	out = append(out, goScenarios()...)
	for i, s := range out {
		if slices.ContainsFunc(out[:i], func(o Scenario) bool { return o.Name == s.Name }) {
			return nil, fmt.Errorf("two scenarios are named %q", s.Name)
		}
	}
	return out, err
}
