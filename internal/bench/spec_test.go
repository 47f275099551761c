//go:build linux

package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/scenarios"
)

// Every benchmark file of scenarios/ parses, each scenario has one name
// and a line for --help, and every scenario is a file.
func TestShippedSpecs(t *testing.T) {
	specs, err := shippedSpecs(scenarios.Files())
	if err != nil {
		t.Fatal(err)
	}
	all, err := allScenarios()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for i, s := range all {
		if names[s.Name] || s.About == "" {
			t.Errorf("scenario %q: twice, or no about", s.Name)
		}
		names[s.Name] = true
		if i >= len(specs) || s.File == "" {
			t.Errorf("scenario %d %s: file %q", i, s.Name, s.File)
		}
	}
	for _, want := range []string{"idle", "oneroom", "rooms", "storm", "topics", "cluster-capacity", "rooms-slo", "cluster", "scaling", "overhead", "compression", "transports"} {
		if !names[want] {
			t.Errorf("no scenario %s", want)
		}
	}
}

const specBase = "name: t\nsteps:\n  - {name: a, rooms: 2}\n  - {name: b, rooms: 4}\n"

func TestParseSpec(t *testing.T) {
	tests := []struct {
		name, yaml, wantErr string
	}{
		{"good", specBase + "bench: {row: \"t {rooms}\", figure: [cpu_per_delivery], until: knee, knee: {row: k, reach: b}, figures: [{name: f, ratio: [b, a], of: p99}]}\n", ""},
		{"figure of several metrics", specBase + "bench: {figures: [{name: f, ratio: [b, a], of: [p99, bytes_per_delivery]}]}\n", ""},
		{"figure of no metric", specBase + "bench: {figures: [{name: f, ratio: [b, a], of: []}]}\n", "names no metric"},
		{"no bench section", specBase, "no bench: section"},
		{"unknown bench field", specBase + "bench: {rows: x}\n", "rows"},
		{"unknown figure", specBase + "bench: {figure: [speed]}\n", `figure "speed": unknown`},
		{"ratio of a step not there", specBase + "bench: {figures: [{name: f, ratio: [a, c], of: p99}]}\n", `"c" is not a step`},
		{"ratio of means", specBase + "bench: {figures: [{name: f, ratio: [[a, b], b], of: p99}]}\n", ""},
		{"diff", specBase + "bench: {figures: [{name: f, diff: [a, b], of: cpu_per_delivery}]}\n", ""},
		{"diff with max", specBase + "bench: {figures: [{name: f, diff: [a, b], of: p99, max: 2}]}\n", "not a diff"},
		{"ratio and diff", specBase + "bench: {figures: [{name: f, ratio: [a, b], diff: [a, b], of: p99}]}\n", "ratio: [STEP, BASE] or diff"},
		{"neither ratio nor diff", specBase + "bench: {figures: [{name: f, of: p99}]}\n", "ratio: [STEP, BASE] or diff"},
		{"a side of no step", specBase + "bench: {figures: [{name: f, ratio: [[], b], of: p99}]}\n", "names no step"},
		{"setups", "name: t\nsteps:\n  - {name: a, bench: {servers: on}}\n  - {name: b, bench: {servers: off, with: a, at: start}}\nbench: {setups: {on: {fresh: true, scrape: 1s}, off: {flags: [--metrics-addr, \"\"]}}}\n", ""},
		{"step on a setup not there", "name: t\nsteps:\n  - {name: a, bench: {servers: on}}\nbench: {}\n", `servers: "on" is not one`},
		{"scrape of a cluster", specBase + "bench: {setups: {c: {nodes: 2, scrape: 1s}}}\n", "one server's /metrics"},
		{"scrape with its own metrics address", specBase + "bench: {servers: {flags: [--metrics-addr, \"\"], scrape: 1s}}\n", "one server's /metrics"},
		{"bad loops", specBase + "bench: {loops: some}\n", "loops"},
		{"bad vary", specBase + "bench: {vary: msg_size}\n", "vary"},
		{"step on more nodes than its setup", "name: t\nsteps:\n  - {name: a, bench: {servers: c, nodes: 3}}\nbench: {setups: {c: {nodes: 2}}}\n", "nodes: 3 (its servers have 2)"},
		{"step on fewer nodes", "name: t\nsteps:\n  - {name: a, bench: {servers: c, nodes: 2, place: first, node_rows: true}}\nbench: {setups: {c: {nodes: 3}}}\n", ""},
		{"bad step place", "name: t\nsteps:\n  - {name: a, bench: {place: there}}\nbench: {}\n", "place"},
		{"as an unknown field", specBase + "bench: {figures: [{name: f, on: a, ratio: [a, b], of: cpu_per_delivery, as: speed}]}\n", "as:"},
		{"as off a row", specBase + "bench: {figures: [{name: f, ratio: [a, b], of: cpu_per_delivery, as: node_cpu_vs_one_node}]}\n", "as:"},
		{"as of a diff", specBase + "bench: {figures: [{name: f, on: a, diff: [a, b], of: cpu_per_delivery, as: node_cpu_vs_one_node}]}\n", "as:"},
		{"bad setup", specBase + "bench: {setups: {c: {nodes: 9}}}\n", "setups: c: nodes 9"},
		{"at start without with", "name: t\nsteps:\n  - {name: a}\n  - {name: b, bench: {at: start}}\nbench: {}\n", "want start, with with:"},
		{"at something else", "name: t\nsteps:\n  - {name: a}\n  - {name: b, bench: {with: a, at: end}}\nbench: {}\n", "want start, with with:"},
		{"ratio of an unknown metric", specBase + "bench: {figures: [{name: f, ratio: [a, b], of: speed}]}\n", `unknown metric "speed"`},
		{"bad until", specBase + "bench: {until: forever}\n", "until"},
		{"bad place", specBase + "bench: {servers: {nodes: 2, place: everywhere}}\n", "place"},
		{"knee of a step not there", specBase + "bench: {knee: {row: k, reach: z}}\n", `reach "z"`},
		{"targets", specBase + "targets: [{name: x, protocol: scalechat, url: \"ws://x\"}]\nbench: {}\n", "not targets"},
		{"bad objective", "slo: [\"p99<5\"]\n" + specBase + "bench: {}\n", "needs a unit"},
		{"no name", "steps:\n  - {rooms: 1}\nbench: {}\n", "needs a name"},
		{"two steps of one name", "name: t\nsteps:\n  - {name: a}\n  - {name: a}\nbench: {}\n", "two steps"},
		{"with a step not just before", "name: t\nsteps:\n  - {name: a}\n  - {name: b}\n  - {name: c, bench: {with: a}}\nbench: {}\n", "just before"},
		{"during a step not beside", "name: t\nsteps:\n  - {name: a, bench: {during: b}}\n  - {name: b}\nbench: {}\n", "runs beside"},
		{"during a step beside", "name: t\nsteps:\n  - {name: a, bench: {during: b}}\n  - {name: b, bench: {with: a, after: 1s}}\nbench: {}\n", ""},
		{"unknown step bench field", "name: t\nsteps:\n  - {name: a, bench: {wiht: x}}\nbench: {}\n", "wiht"},
		{"figure on a step not there", specBase + "bench: {figures: [{name: f, on: z, ratio: [a, b], of: p99}]}\n", `on "z"`},
		{"round trips", specBase + "bench: {sweep: {rooms: {from: 10, to: 30, step: 10}, smoke: [1], transport: [websocket, long-polling, polling]}, round_trip: 3s, poll_wait: 5s, poll_interval: 1s, comparison: cmp, figure: [errors, megabytes, bytes_in_per_message]}\n", ""},
		{"a step's transport", "name: t\nsteps:\n  - {name: a, bench: {transport: polling}}\nbench: {round_trip: 3s, poll_interval: 1s}\n", ""},
		{"bad step transport", "name: t\nsteps:\n  - {name: a, bench: {transport: pigeon}}\nbench: {}\n", `transport "pigeon"`},
		{"bad sweep transport", specBase + "bench: {sweep: {rooms: [1], transport: [pigeon]}}\n", `sweep: transport "pigeon"`},
		{"sweep of no rooms", specBase + "bench: {sweep: {rooms: []}}\n", "rooms: no values"},
		{"sweep of no room", specBase + "bench: {sweep: {rooms: [0, 2]}}\n", "at least 1"},
		{"bad sweep range", specBase + "bench: {sweep: {rooms: {from: 5, to: 1}}}\n", "want 1 ≤ from ≤ to"},
		{"polling without round trips", specBase + "bench: {sweep: {rooms: [1], transport: [polling]}, poll_interval: 1s}\n", "need round_trip"},
		{"long polling without its wait", specBase + "bench: {sweep: {rooms: [1], transport: [long-polling]}, round_trip: 3s}\n", "poll_wait"},
		{"long polling beyond the server's wait", specBase + "bench: {sweep: {rooms: [1], transport: [long-polling]}, round_trip: 3s, poll_wait: 61s}\n", "poll_wait"},
		{"polling without its interval", specBase + "bench: {sweep: {rooms: [1], transport: [polling]}, round_trip: 3s}\n", "poll_interval"},
		{"comparison without round trips", specBase + "bench: {comparison: cmp}\n", "comparison"},
		{"comparison out of the work folder", specBase + "bench: {round_trip: 1s, comparison: ../cmp}\n", "comparison"},
		{"round trips on a cluster", specBase + "bench: {round_trip: 1s, servers: {nodes: 2}}\n", "one server each"},
		{"round trips to the knee", specBase + "bench: {round_trip: 1s, until: knee}\n", "one server each"},
		{"round trips without their metrics", specBase + "bench: {round_trip: 1s, servers: {flags: [--metrics-addr, \"\"]}}\n", "no --metrics-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseSpec("t.yaml", []byte(tt.yaml))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func mustSpec(t *testing.T, yaml string) *spec {
	t.Helper()
	sp, err := parseSpec("t.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// A step's verdict comes from the objectives that apply to it: met,
// MISSED with the reason in the note, "–" when a figure could not be
// read, each saying when the generator saturated.
func TestSpecJudge(t *testing.T) {
	sp := mustSpec(t, "slo: [\"p99<50ms\", \"cpu_per_delivery<=10us\", \"b:delivery>=100%\"]\n"+specBase+"bench: {}\n")
	tests := []struct {
		name    string
		step    string
		figures map[string]float64
		sat     bool
		want    string
		target  string
		note    string
	}{
		{"met", "a", map[string]float64{"p99": 3, "cpu_per_delivery": 0.005}, false, "met", "p99<50ms, cpu_per_delivery<=10us", ""},
		{"missed", "a", map[string]float64{"p99": 80, "cpu_per_delivery": 0.005}, false, "MISSED", "p99<50ms, cpu_per_delivery<=10us", "p99 = 80ms, not < 50ms"},
		{"missed, saturated", "a", map[string]float64{"p99": 80, "cpu_per_delivery": 0.005}, true, "MISSED (generator saturated)", "", ""},
		{"met, saturated", "a", map[string]float64{"p99": 3, "cpu_per_delivery": 0.005}, true, "met (generator saturated)", "", ""},
		{"not read", "a", map[string]float64{"p99": 3}, false, "–", "", "cpu_per_delivery<=10us not judged"},
		{"a step's own objective", "b", map[string]float64{"p99": 3, "cpu_per_delivery": 0.005, "delivery": 0.99}, false, "MISSED", "p99<50ms, cpu_per_delivery<=10us, delivery>=100%", "delivery = 99%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := specStep{step: loadtest.Step{Name: tt.step}, figures: tt.figures, row: Result{Saturated: tt.sat}}
			met := sp.judge(&s)
			if s.row.Verdict != tt.want || met != (tt.want == "met" || tt.want == "met (generator saturated)") {
				t.Errorf("verdict %q (met %v), want %q", s.row.Verdict, met, tt.want)
			}
			if tt.target != "" && s.row.Target != tt.target {
				t.Errorf("target %q, want %q", s.row.Target, tt.target)
			}
			if !strings.Contains(s.row.Note, tt.note) {
				t.Errorf("note %q lacks %q", s.row.Note, tt.note)
			}
		})
	}
}

// The knee row is the last step that met every objective; with reach:, it
// is judged against that step; a saturated generator makes it a lower
// bound.
func TestKneeRow(t *testing.T) {
	sp := mustSpec(t, "name: t\nsteps:\n  - {name: n1, room_size: 1}\n  - {name: n2, room_size: 2}\n  - {name: n3, room_size: 3}\n"+
		"bench: {row: \"t n={room_size}\", until: knee, knee: {row: t largest, figure: \"N = {room_size} at {deliveries_per_s}/s\", reach: n2}}\n")
	step := func(i int, met, sat bool) specStep {
		st := sp.sc.Steps[i]
		return specStep{step: st, met: met, row: Result{Scenario: sp.rowName(st), PerSecond: float64(1000 * (i + 1)), Saturated: sat}}
	}
	tests := []struct {
		name         string
		done         []specStep
		smoke        bool
		figure, want string
	}{
		{"reached", []specStep{step(0, true, false), step(1, true, false), step(2, false, false)}, false, "N = 2 at 2000/s", "met"},
		{"short of it", []specStep{step(0, true, false), step(1, false, false)}, false, "N = 1 at 1000/s", "MISSED"},
		{"none met", []specStep{step(0, false, false)}, false, "none met the objectives", "MISSED"},
		{"saturated", []specStep{step(0, true, false), step(1, true, true)}, false, "≥ N = 2 at 2000/s (lower bound)", "met (generator saturated)"},
		{"smoke, not reached", []specStep{step(0, true, false)}, true, "N = 1 at 1000/s", "–"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := sp.kneeRow(tt.done, "", tt.smoke)
			if row.Scenario != "t largest" || row.Figure != tt.figure || row.Verdict != tt.want || row.Target != "≥ t n=2" {
				t.Errorf("knee %q: figure %q, verdict %q, target %q; want %q, %q", row.Scenario, row.Figure, row.Verdict, row.Target, tt.figure, tt.want)
			}
		})
	}
}

// A figures: row is one metric of a step over another's, judged against
// its max when it has one.
func TestFigureRow(t *testing.T) {
	done := []specStep{
		{step: loadtest.Step{Name: "a"}, figures: map[string]float64{"cpu_per_delivery": 0.004, "p99": 2, "generator_per_message": 1.5}},
		{step: loadtest.Step{Name: "b"}, figures: map[string]float64{"cpu_per_delivery": 0.005, "generator_per_message": 1}},
		{step: loadtest.Step{Name: "c"}, figures: map[string]float64{"cpu_per_delivery": 0.006}},
	}
	tests := []struct {
		f                    specFigure
		figure, target, want string
	}{
		{specFigure{Name: "x", Ratio: [2]nameList{{"a"}, {"b"}}, Of: nameList{"cpu_per_delivery"}, Max: 1}, "CPU ×0.80", "≤ ×1", "met"},
		{specFigure{Name: "x", Ratio: [2]nameList{{"b"}, {"a"}}, Of: nameList{"cpu_per_delivery"}, Max: 1}, "CPU ×1.25", "≤ ×1", "MISSED"},
		{specFigure{Name: "x", Ratio: [2]nameList{{"b"}, {"a"}}, Of: nameList{"cpu_per_delivery"}}, "CPU ×1.25", "", ""},
		{specFigure{Name: "x", Ratio: [2]nameList{{"a"}, {"b"}}, Of: nameList{"p99"}}, "–", "", "n/a"},
		{specFigure{Name: "x", Ratio: [2]nameList{{"a"}, {"b"}}, Of: nameList{"p99", "cpu_per_delivery"}}, "p99 –, CPU ×0.80", "", ""},
		{specFigure{Name: "x", Ratio: [2]nameList{{"a"}, {"b"}}, Of: nameList{"p99", "cpu_per_delivery"}, Max: 1}, "p99 –, CPU ×0.80", "≤ ×1", "n/a"},
		{specFigure{Name: "x", On: "a", Ratio: [2]nameList{{"a"}, {"b"}}, Of: nameList{"cpu_per_delivery"}}, "x ×0.80", "", ""},
		// A side of several steps is their mean: (0.004+0.006)/2 over 0.005.
		{specFigure{Name: "x", Ratio: [2]nameList{{"a", "c"}, {"b"}}, Of: nameList{"cpu_per_delivery"}}, "CPU ×1.00", "", ""},
		{specFigure{Name: "x", Diff: [2]nameList{{"b"}, {"a"}}, Of: nameList{"cpu_per_delivery"}}, "+1.00 µs/deliv (+25%) server CPU", "", ""},
		{specFigure{Name: "x", Diff: [2]nameList{{"a"}, {"b"}}, Of: nameList{"generator_per_message"}}, "+0.50 µs/msg (+50%) generator CPU", "", ""},
		{specFigure{Name: "x", Diff: [2]nameList{{"a"}, {"c"}}, Of: nameList{"generator_per_message"}}, "–", "", "n/a"},
	}
	for _, tt := range tests {
		row := figureRow(tt.f, done)
		if row.Figure != tt.figure || row.Target != tt.target || row.Verdict != tt.want {
			t.Errorf("%+v: figure %q, target %q, verdict %q; want %q, %q, %q", tt.f, row.Figure, row.Target, row.Verdict, tt.figure, tt.target, tt.want)
		}
	}
}

// --smoke takes the file's smoke: fields (or shrinks every step) and at
// most smoke_steps steps.
func TestSpecSteps(t *testing.T) {
	sp := mustSpec(t, "name: t\nsmoke: {duration: 1s}\nsteps:\n  - {name: a, rooms: 200, smoke: {rooms: 2}}\n  - {name: b, rooms: 400}\n  - {name: c}\nbench: {smoke_steps: 2}\n")
	if got := sp.steps(false); len(got) != 3 || got[0].Rooms != 200 {
		t.Errorf("full steps %+v", got)
	}
	got := sp.steps(true)
	if len(got) != 2 || got[0].Rooms != 2 || got[1].Rooms != 400 || got[1].Duration.D().Seconds() != 1 {
		t.Errorf("smoke steps %+v", got)
	}
	plain := mustSpec(t, specBase+"bench: {}\n")
	if got := plain.steps(true); len(got) != 2 || got[1].Rooms != 3 || got[1].Duration.D().Seconds() != 1 {
		t.Errorf("shrunk steps %+v", got)
	}
}

// A figure on a step's row is its figure, and joins its target and
// verdict: met only when both are.
func TestOnRow(t *testing.T) {
	tests := []struct {
		row, fig, want string
	}{
		{"met", "met", "met"},
		{"met", "MISSED", "MISSED"},
		{"MISSED", "met", "MISSED"},
		{"met", "n/a", "–"},
		{"–", "met", "–"},
	}
	for _, tt := range tests {
		row := Result{Target: "p99<5ms", Verdict: tt.row}
		onRow(&row, Result{Figure: "connect p99 ×1.20", Target: "≤ ×2", Verdict: tt.fig})
		if row.Verdict != tt.want || row.Target != "p99<5ms; ≤ ×2" || row.Figure != "connect p99 ×1.20" {
			t.Errorf("%s + %s: %+v, want %s", tt.row, tt.fig, row, tt.want)
		}
		if missed := strings.Contains(row.Note, "connect p99 ×1.20, not ≤ ×2"); missed != (tt.fig == "MISSED") {
			t.Errorf("%s + %s: note %q", tt.row, tt.fig, row.Note)
		}
	}
}

// A step whose connections a process cannot hold under the open-file
// limit is not run: split over nodes, each holds its share.
func TestTooMany(t *testing.T) {
	one := mustSpec(t, "name: t\nsteps:\n  - {name: a, rooms: 1000, room_size: 10}\nbench: {}\n")
	two := mustSpec(t, "name: t\nsteps:\n  - {name: a, rooms: 1000, room_size: 10}\nbench: {servers: {nodes: 2}}\n")
	first := mustSpec(t, "name: t\nsteps:\n  - {name: a, rooms: 1000, room_size: 10}\nbench: {servers: {nodes: 2, place: first}}\n")
	setup := mustSpec(t, "name: t\nsteps:\n  - {name: a, rooms: 1000, room_size: 10, bench: {servers: pair}}\nbench: {setups: {pair: {nodes: 2}}}\n")
	tests := []struct {
		sp     *spec
		nofile int
		stop   bool
	}{
		{one, 20000, false},
		{one, 10500, true},
		{two, 10500, false},
		{first, 10500, true},
		{setup, 10500, false}, // the step's own setup splits it
		{one, 0, false},       // the limit unknown
	}
	for i, tt := range tests {
		why := tt.sp.tooMany(tt.sp.sc.Steps, tt.nofile)
		if (why != "") != tt.stop || (tt.stop && !strings.Contains(why, "ulimit -n")) {
			t.Errorf("%d: %q, want stop %v", i, why, tt.stop)
		}
	}
}

func TestExpand(t *testing.T) {
	sp := mustSpec(t, specBase+"bench: {row: \"topics {clients}×{rooms_per_client}/{rooms}\"}\n")
	st := loadtest.Step{Name: "x", Rooms: 100, NumClients: 40, RoomsPerClient: 5}
	if got := sp.rowName(st); got != "topics 40×5/100" {
		t.Errorf("row %q", got)
	}
	if got := sp.expand("{sent} in, {name}", st, map[string]string{"sent": "7"}); got != "7 in, x" {
		t.Errorf("expand %q", got)
	}
}

// A setup's servers stop after the last step that uses them, and fresh
// ones after each group: no idle server beside another setup's steps.
func TestSetupLifetime(t *testing.T) {
	sp := mustSpec(t, "name: t\nsteps:\n  - {name: a}\n  - {name: b, bench: {servers: f}}\n  - {name: c, bench: {servers: k}}\n  - {name: d, bench: {servers: f}}\n  - {name: e, bench: {servers: k}}\n"+
		"bench: {setups: {f: {fresh: true}, k: {}}}\n")
	s := newSpecSetups(nil, sp)
	steps := sp.sc.Steps
	for i, want := range [][]string{{}, {}, {"k"}, {"k"}, {}} {
		s.live[sp.setupOf(steps[i])] = &setupProcs{cfg: s.config(sp.setupOf(steps[i]))}
		s.endGroup(steps[i+1:])
		var got []string
		for name := range s.live {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) && (len(got) > 0 || len(want) > 0) {
			t.Errorf("after step %s: running %q, want %q", steps[i].Name, got, want)
		}
	}
}
