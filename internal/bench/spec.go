//go:build linux

package bench

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"

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
	// out, when set, is where a round_trip: run writes its comparison
	// files and what it says of its command (bench transports' flags).
	out *comparisonOut
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
	// Sweep generates the steps: each file step once per rooms value
	// and, within it, once per transport (specSweep).
	Sweep *specSweep `yaml:"sweep"`
	// RoundTrip, when set, measures each step as round trips: every
	// client sends one message and waits for it to come back within
	// this (spec_roundtrip.go); the row's server CPU covers the whole
	// run, connects included, and the bytes read and written are kept.
	RoundTrip loadtest.Duration `yaml:"round_trip"`
	// PollWait and PollInterval are the long-polling and polling
	// transports' wait and interval (loadtest's --poll-wait and
	// --poll-interval).
	PollWait     loadtest.Duration `yaml:"poll_wait"`
	PollInterval loadtest.Duration `yaml:"poll_interval"`
	// Comparison names a folder of the work folder (--dir) where a
	// round_trip: benchmark writes its runs as transports.csv and
	// transports.json, which scalechat report draws.
	Comparison string `yaml:"comparison"`
}

// specSweep generates a benchmark's steps: for each value of Rooms (the
// values of Smoke with --smoke), for each of Transport (none: the steps'
// own), each file step with those rooms and that transport, named
// STEP-TRANSPORT-ROOMS.
type specSweep struct {
	Rooms     intRange `yaml:"rooms"`
	Smoke     intRange `yaml:"smoke"`
	Transport []string `yaml:"transport"`
}

// intRange is a list of numbers ([10, 20, 50]) or a range of them
// ({from: 100, to: 1000, step: 50}).
type intRange []int

// UnmarshalYAML takes a list or a range.
func (v *intRange) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		var list []int
		if err := n.Decode(&list); err != nil {
			return err
		}
		*v = list
		return nil
	}
	var rng struct {
		From int `yaml:"from"`
		To   int `yaml:"to"`
		Step int `yaml:"step"`
	}
	if err := n.Decode(&rng); err != nil {
		return err
	}
	list, err := ClientSteps(rng.From, rng.To, cmp.Or(rng.Step, 1))
	*v = list
	return err
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
	// Transport is how this step's clients talk to the server:
	// websocket (the default), long-polling or polling (loadtest's
	// --transport poll, with the file's poll_wait or poll_interval).
	Transport string `yaml:"transport"`
}

// specServers are the servers a benchmark starts: this binary's serve,
// nodes of them (a cluster on one redis-server when more than one, or
// with redis), each with flags. Engine "nats" ties them on one
// nats-server with JetStream instead (engine "redis", the default, on
// Redis), however many. Place "split" (a cluster's default) runs one
// generator per node, shard i/n on node i; "first" puts every client
// on the first node. Fresh servers are started for each group of steps
// and stopped after it (others live from their first step to the file's
// end); Scrape reads the one server's /metrics this often while a step
// runs, as a monitoring system would.
type specServers struct {
	Nodes  int               `yaml:"nodes"`
	Redis  bool              `yaml:"redis"`
	Engine string            `yaml:"engine"`
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
	// 1 s ÷ redis_per_delivery: the deliveries a second one Redis core
	// would carry at the step's cost.
	"redis_core_deliveries": "%s deliveries/s a Redis core",
	// The same two of a cluster on NATS (engine: nats): nats-server's
	// CPU per delivery, and the deliveries a second of one NATS core.
	"nats_per_delivery":    "NATS %.2f µs/deliv",
	"nats_core_deliveries": "%s deliveries/s a NATS core",
	"unavailable":          "%.0f unavailable",
	"deliveries_per_s":     "%s deliveries/s",
	"bytes_per_delivery":   "%.0f B/deliv out",
	// µs of generator CPU per message it recorded (sent + received),
	// over the sending window: what the generator's own work costs.
	"generator_per_message": "gen %.2f µs/msg",
	// Of a round_trip: step: the clients whose message did not come
	// back in time, and the bytes the server read and wrote, in all and
	// per message sent.
	"errors":                "%.0f errors",
	"megabytes":             "%.2f MB",
	"bytes_in_per_message":  "%.0f B/msg in",
	"bytes_out_per_message": "%.0f B/msg out",
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

// allScenarios are the benchmark files of scenarios/: every named
// scenario is one; an embedded file that does not parse is an error (a
// test keeps them parsing).
func allScenarios() ([]Scenario, error) {
	specs, err := shippedSpecs(scenarios.Files())
	var out []Scenario
	for _, sp := range specs {
		out = append(out, specScenario(sp))
	}
	for i, s := range out {
		if slices.ContainsFunc(out[:i], func(o Scenario) bool { return o.Name == s.Name }) {
			return nil, fmt.Errorf("two scenarios are named %q", s.Name)
		}
	}
	return out, err
}

// shippedSpec is the benchmark file of scenarios/ named name.
func shippedSpec(name string) (*spec, error) {
	specs, err := shippedSpecs(scenarios.Files())
	if err != nil {
		return nil, err
	}
	for _, sp := range specs {
		if sp.sc.Name == name {
			return sp, nil
		}
	}
	return nil, fmt.Errorf("no benchmark file in scenarios/ is named %q", name)
}
