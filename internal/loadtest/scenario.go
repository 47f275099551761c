//go:build linux

package loadtest

import (
	"bytes"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// Scenario is a scenario file: steps run one after another with a pause.
//
//	name: one-room sweep
//	pause: 5s
//	defaults: {msg_frequency: 1s, msg_size: 256, duration: 20s}
//	steps:
//	  - {name: n10, rooms: 1, room_size: 10}
//	  - {name: n20, rooms: 1, room_size: 20}
//
// A step's fields override the defaults, which override the command-line
// flags (so flags fill in whatever the file leaves out).
//
// Two parts are for scalechat bench, which runs a file as a benchmark:
// smoke: (at the top, or in a step) holds step fields that replace the
// step's under bench --smoke, and bench: (at the top, or in a step) how to
// run and report it (internal/bench reads it; loadtest keeps it unread).
type Scenario struct {
	Name    string
	Pause   *Duration
	Steps   []Step
	Targets []Target // servers to run the steps against (scalechat bench compare); loadtest ignores them
	// SLO are the objectives every run of the file is judged against, in
	// --slo's syntax, unless --slo is given.
	SLO []string
	// SmokeSteps are Steps as bench --smoke runs them: each with the
	// file's top-level smoke: fields, then its own, over it; nil when
	// the file has no smoke: at all.
	SmokeSteps []Step
	// Bench is the file's bench: section, unread (zero when absent), and
	// StepBench each step's (nil when absent).
	Bench     yaml.Node
	StepBench []*yaml.Node
}

// Target is a server a comparison runs a scenario's steps against
// (`scalechat bench compare`, docs/loadtest.md). In URL, Command and Ready,
// {port} stands for a free loopback port the bench picks and {scalechat}
// for the scalechat binary.
type Target struct {
	Name      string   `yaml:"name" json:"name"`
	Protocol  string   `yaml:"protocol" json:"protocol"`                       // as --protocol
	URL       string   `yaml:"url" json:"url"`                                 // as --url
	Namespace string   `yaml:"namespace,omitempty" json:"namespace,omitempty"` // as --namespace (centrifugo, socketio)
	Command   []string `yaml:"command,omitempty" json:"command,omitempty"`     // started, pinned to the server CPU, and stopped by the bench
	PID       int      `yaml:"pid,omitempty" json:"pid,omitempty"`             // or: a running server to watch
	Ready     string   `yaml:"ready,omitempty" json:"ready,omitempty"`         // an http:// URL that answers 200 once the server is ready; default: its port accepts
}

type scenarioFile struct {
	Name     string      `yaml:"name"`
	Pause    *Duration   `yaml:"pause"`
	Defaults yaml.Node   `yaml:"defaults"`
	Steps    []yaml.Node `yaml:"steps"`
	Targets  []Target    `yaml:"targets"`
	SLO      []string    `yaml:"slo"`
	Smoke    yaml.Node   `yaml:"smoke"`
	Bench    yaml.Node   `yaml:"bench"`
}

// LoadScenario reads a scenario file; base holds the flag values.
func LoadScenario(path string, base Step) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return ParseScenario(b, base)
}

// ParseScenario parses a scenario file's content.
func ParseScenario(b []byte, base Step) (*Scenario, error) {
	var f scenarioFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if len(f.Steps) == 0 {
		return nil, fmt.Errorf("scenario: no steps")
	}
	if !f.Defaults.IsZero() {
		if err := DecodeStrict(&f.Defaults, &base); err != nil {
			return nil, fmt.Errorf("scenario defaults: %w", err)
		}
	}
	sc := &Scenario{Name: f.Name, Pause: f.Pause, Targets: f.Targets, SLO: f.SLO, Bench: f.Bench}
	smoke := !f.Smoke.IsZero()
	for i := range f.Steps {
		s := base
		s.Name = fmt.Sprintf("s%d", i+1)
		own := cutKey(&f.Steps[i], "smoke")
		sc.StepBench = append(sc.StepBench, cutKey(&f.Steps[i], "bench"))
		if err := DecodeStrict(&f.Steps[i], &s); err != nil {
			return nil, fmt.Errorf("scenario step %d: %w", i+1, err)
		}
		sc.Steps = append(sc.Steps, s)
		smoke = smoke || own != nil
		small := s
		for _, n := range []*yaml.Node{&f.Smoke, own} {
			if n != nil && !n.IsZero() {
				if err := DecodeStrict(n, &small); err != nil {
					return nil, fmt.Errorf("scenario step %d smoke: %w", i+1, err)
				}
			}
		}
		sc.SmokeSteps = append(sc.SmokeSteps, small)
	}
	if !smoke {
		sc.SmokeSteps = nil
	}
	return sc, nil
}

// cutKey removes key from the mapping n and returns its value (nil when
// n has no such key): a step's smoke: fields are not the step's own.
func cutKey(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			n.Content = append(n.Content[:i:i], n.Content[i+2:]...)
			return v
		}
	}
	return nil
}

// decodeStrict decodes n into v, refusing unknown fields (yaml.Node.Decode
// does not check them).
func DecodeStrict(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}
