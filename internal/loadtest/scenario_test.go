//go:build linux

package loadtest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseScenario(t *testing.T) {
	base := Step{Name: "x", Rooms: 1, RoomSize: 2, RoomsPerClient: 1, MsgFrequency: Duration(time.Second), MsgSize: 256,
		Duration: Duration(30 * time.Second), Ramp: 1000, Drain: Duration(3 * time.Second)}
	tests := []struct {
		name    string
		yaml    string
		wantErr string
		check   func(t *testing.T, sc *Scenario)
	}{
		{"defaults and overrides", `
pause: 1s
defaults: {msg_size: 64, duration: 5s}
steps:
  - {name: a, rooms: 3}
  - {room_size: 7, msg_frequency: 0, msg_size: 10}
`, "", func(t *testing.T, sc *Scenario) {
			a, b := sc.Steps[0], sc.Steps[1]
			if a.Name != "a" || a.Rooms != 3 || a.RoomSize != 2 || a.MsgSize != 64 || a.Duration.D() != 5*time.Second || a.Ramp != 1000 {
				t.Errorf("step a %+v", a)
			}
			if b.Name != "s2" || b.Rooms != 1 || b.RoomSize != 7 || b.MsgFrequency != 0 || b.MsgSize != 10 {
				t.Errorf("step b %+v", b)
			}
			if sc.Pause == nil || sc.Pause.D() != time.Second {
				t.Errorf("pause %v", sc.Pause)
			}
		}},
		{"targets", `
steps:
  - {rooms: 2}
targets:
  - {name: ours, protocol: scalechat, url: "ws://127.0.0.1:{port}/ws", command: ["{scalechat}", serve], ready: "http://127.0.0.1:{port}/readyz"}
  - {name: theirs, protocol: centrifugo, url: "ws://127.0.0.1:8000/connection/websocket", namespace: chat, pid: 42}
`, "", func(t *testing.T, sc *Scenario) {
			if len(sc.Targets) != 2 || sc.Targets[0].Command[0] != "{scalechat}" || sc.Targets[1].PID != 42 || sc.Targets[1].Namespace != "chat" {
				t.Errorf("targets %+v", sc.Targets)
			}
		}},
		{"objectives", "slo: [\"p99<50ms\", \"delivery>=100%\"]\nsteps:\n  - {rooms: 1}\n", "", func(t *testing.T, sc *Scenario) {
			if strings.Join(sc.SLO, " ") != "p99<50ms delivery>=100%" {
				t.Errorf("slo %q", sc.SLO)
			}
		}},
		{"smoke and bench", `
smoke: {duration: 1s}
steps:
  - {name: big, rooms: 500, smoke: {rooms: 5}, bench: {row: big one}}
  - {name: small, rooms: 2}
bench: {row: "r {rooms}"}
`, "", func(t *testing.T, sc *Scenario) {
			if sc.Steps[0].Rooms != 500 || sc.Steps[0].Duration.D() != 30*time.Second {
				t.Errorf("the step took its smoke fields: %+v", sc.Steps[0])
			}
			if len(sc.SmokeSteps) != 2 || sc.SmokeSteps[0].Rooms != 5 || sc.SmokeSteps[1].Rooms != 2 || sc.SmokeSteps[1].Duration.D() != time.Second || sc.SmokeSteps[0].Name != "big" {
				t.Errorf("smoke steps %+v", sc.SmokeSteps)
			}
			if sc.Bench.IsZero() || len(sc.StepBench) != 2 || sc.StepBench[0] == nil || sc.StepBench[1] != nil {
				t.Errorf("the bench sections: %v, steps' %v", sc.Bench, sc.StepBench)
			}
		}},
		{"no smoke", "steps:\n  - {rooms: 1}\n", "", func(t *testing.T, sc *Scenario) {
			if sc.SmokeSteps != nil || !sc.Bench.IsZero() {
				t.Errorf("smoke steps %+v, bench %v", sc.SmokeSteps, sc.Bench)
			}
		}},
		{"unknown smoke field", "steps:\n  - {rooms: 1, smoke: {roms: 1}}\n", "roms", nil},
		{"unknown target field", "steps:\n  - {rooms: 1}\ntargets:\n  - {name: a, cmd: x}\n", "cmd", nil},
		{"unknown field", "steps:\n  - {rooms: 1, room_sise: 3}\n", "room_sise", nil},
		{"unknown default", "defaults: {bogus: 1}\nsteps:\n  - {rooms: 1}\n", "bogus", nil},
		{"bad duration", "steps:\n  - {duration: soon}\n", "invalid duration", nil},
		{"no steps", "name: empty\n", "no steps", nil},
		{"not yaml", "steps: [", "scenario", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := ParseScenario([]byte(tt.yaml), base)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, sc)
		})
	}
}

// The shipped scenarios must load and validate.
func TestShippedScenarios(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/*.yaml")
	if len(files) < 3 {
		t.Fatalf("found %d scenario files", len(files))
	}
	for _, f := range files {
		sc, err := LoadScenario(f, Step{RoomsPerClient: 1, MsgFrequency: Duration(time.Second), MsgSize: 256, Duration: Duration(time.Second), Ramp: 100})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		cfg := &Config{URL: "ws://127.0.0.1:8080/ws", Steps: sc.Steps, RoomPrefix: "x", Loops: 1, ConnectTimeout: 1}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
