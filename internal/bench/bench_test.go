//go:build linux

package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
)

func TestInterpolate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ss := []sample{{at: t0, cpu: 0}, {at: t0.Add(time.Second), cpu: 100 * time.Millisecond}, {at: t0.Add(2 * time.Second), cpu: 300 * time.Millisecond}}
	for _, tt := range []struct {
		at   time.Time
		want time.Duration
	}{
		{t0.Add(-time.Second), 0},
		{t0, 0},
		{t0.Add(500 * time.Millisecond), 50 * time.Millisecond},
		{t0.Add(1500 * time.Millisecond), 200 * time.Millisecond},
		{t0.Add(time.Hour), 300 * time.Millisecond},
	} {
		if got := interpolate(ss, tt.at); got != tt.want {
			t.Errorf("interpolate at %v = %v, want %v", tt.at.Sub(t0), got, tt.want)
		}
	}
	if got := interpolate(nil, t0); got != 0 {
		t.Errorf("no samples: %v", got)
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	// Burn some CPU so that utime+stime is above one tick.
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	s, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.cpu <= 0 || s.rss < 1<<20 {
		t.Errorf("own stat: cpu %v rss %d", s.cpu, s.rss)
	}
	if _, err := readStat(1 << 30); err == nil {
		t.Error("a process that does not exist has a stat")
	}
}

const eventsCSV = `step,room,message_id,sender_id,client_id,event,unix_us,lag_us
s,r0,,,0,Joined,100,
s,r0,,,1,Joined,100,
s,r0,,,2,Joined,500,
s,r0,1,0,0,Sent,200,3
s,r0,1,0,0,Received,210,
s,r0,1,0,1,Received,230,
s,r0,1,1,1,Sent,1000,0
s,r0,1,1,0,Received,1100,
s,r0,1,1,1,Received,1010,
s,r0,1,1,2,Received,1400,
`

func TestEventsGroup(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e.csv")
	if err := os.WriteFile(p, []byte(eventsCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	ev, err := readEvents(p)
	if err != nil {
		t.Fatal(err)
	}
	parity := func(s, r uint64) string {
		if s%2 == r%2 {
			return "same"
		}
		return "cross"
	}
	g := ev.group(func(sentMsg) bool { return true }, parity)
	// Message (0,1) due at 200: clients 0 and 1 had joined (2 later), both received.
	// Message (1,1) due at 1000: all three had joined and received.
	same, cross := g["same"], g["cross"]
	if same == nil || cross == nil {
		t.Fatalf("groups %v", g)
	}
	if same.expected != 2 || same.count() != 2 || cross.expected != 3 || cross.count() != 3 {
		t.Errorf("same %d/%d cross %d/%d", same.count(), same.expected, cross.count(), cross.expected)
	}
	if same.ms(100) != 0.01 || cross.ms(100) != 0.4 || same.ratio() != 1 {
		t.Errorf("same max %v cross max %v ratio %v", same.ms(100), cross.ms(100), same.ratio())
	}
	// A window keeps only the message due at 1000.
	g = ev.group(func(m sentMsg) bool { return m.due >= 500 }, func(_, _ uint64) string { return "" })
	if l := g[""]; l == nil || l.count() != 3 || l.expected != 3 {
		t.Errorf("window: %+v", g[""])
	}

	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("h\ns,r0,x,0,0,Sent,1,\n"), 0o644)
	if _, err := readEvents(bad); err == nil {
		t.Error("a bad message id was accepted")
	}
}

func TestPrintTable(t *testing.T) {
	var b bytes.Buffer
	PrintTable(&b, []Result{
		{Scenario: "rooms 2500×4", Clients: 10000, PerSecond: 40000, Ratio: 1, P50: 0.4, P99: 3.1, Max: 120, ServerCPU: 2.5,
			CPUPerDel: 4.2, RSS: 50 << 20, GenCPU: 9, Target: "p99 < 50ms", Verdict: "met"},
		{Scenario: "idle", Ratio: -1, Saturated: true, Figure: "1.00 KiB/conn", Verdict: "MISSED", Note: "why"},
	})
	out := b.String()
	for _, want := range []string{"scenario", "rooms 2500×4", "40.0k", "100%", "0.40ms", "120ms", "4.20", "50.0MiB", "met", "YES", "1.00 KiB/conn", "  idle: why"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestVerdict(t *testing.T) {
	if verdict(true, false) != "met" || verdict(true, true) != "met (generator saturated)" || verdict(false, false) != "MISSED" || !strings.Contains(verdict(false, true), "saturated") {
		t.Error("verdicts")
	}
}

func TestUnknownScenario(t *testing.T) {
	err := Run(context.Background(), []string{"nope"}, Options{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "unknown scenario") {
		t.Errorf("err = %v", err)
	}
}

// TestSmoke builds the scalechat binary and runs `scalechat bench --smoke`:
// every scenario but those with Redis (TestClusterSmoke, TestRedisSpecsSmoke)
// must run and land in the table. It asserts nothing about speed.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and load generators for about half a minute")
	}
	exe := buildScalechat(t)
	var names []string
	redis := redisSpecs(t)
	for _, s := range Scenarios() {
		if slices.Contains(redis, s.Name) {
			continue // TestClusterSmoke and TestRedisSpecsSmoke run them, with redis-server
		}
		names = append(names, s.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	jsonFile := filepath.Join(t.TempDir(), "smoke.json")
	cmd := exec.CommandContext(ctx, exe, append([]string{"bench", "--smoke", "--dir", dir, "--json", jsonFile}, names...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	t.Logf("stdout:\n%s", out)
	if err != nil {
		t.Fatalf("bench --smoke: %v\nstderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"scalechat bench, smoke", "scenario", "deliv/s", "idle", "oneroom n=5", "oneroom largest N", "rooms 10×4", "rooms-slo 5×4", "rooms-slo 2×10", "rooms-slo: rooms of 50 vs of 4",
		"storm: connects during traffic", "storm: traffic during connects", "topics 40×5/100", "overhead: CSV recording", "overhead: metrics",
		"transports websocket n=10", "transports long-polling n=20", "transports polling n=20",
		"compression 256 B: on vs off", "compression 4096 B: on vs off", "scaling 1 loop, 2500/s planned", "scaling 1 loop: knee"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), " error") {
			t.Errorf("a scenario reported an error: %s", line)
		}
	}
	// The results file names the machine, the CPUs and the command.
	f, err := results.ReadBenchFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Smoke || f.Host.Cores < 1 || f.Host.Kernel == "" || !strings.HasPrefix(f.Command, "scalechat bench --dir ") || (f.Pinned && f.ServerCPUs == "") {
		t.Errorf("results file: smoke %v, host %+v, command %q, server CPUs %q", f.Smoke, f.Host, f.Command, f.ServerCPUs)
	}
	// Every generator wrote its meta.json where --dir says.
	if m, _ := filepath.Glob(filepath.Join(dir, "*.meta.json")); len(m) < len(names) {
		t.Errorf("%d meta files in --dir, want at least %d", len(m), len(names))
	}
}

// buildScalechat builds the binary once for the tests that run it.
func buildScalechat(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "scalechat")
	build := exec.Command("go", "build", "-o", exe, "github.com/scalechat/scalechat/cmd/scalechat")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return exe
}

// The analyze and generator benchmarks run end to end at tiny sizes: they
// prove the commands work, not how fast anything is.
func TestAnalyzeAndGeneratorBenchmarks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the analyzer and load generators")
	}
	exe := buildScalechat(t)
	pandasRuns := "0"
	if exec.Command("python3", "-c", "import pandas").Run() == nil {
		pandasRuns = "1" // then the cross-check with pandas runs too
	}
	file := filepath.Join(t.TempDir(), "events.csv")
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"bench", "analyze", "--size", "3MB", "--runs", "2", "--pandas-runs", pandasRuns, "--file", file},
			[]string{"generating " + file, "scalechat analyze run 2:", "scalechat analyze: median"}},
		{[]string{"bench", "analyze", "--format", "legacy", "--size", "3MB", "--runs", "1", "--pandas-runs", pandasRuns, "--file", filepath.Join(filepath.Dir(file), "legacy", "steps.txt")},
			[]string{"older format with UUID ids", "legacy format", "scalechat analyze: median"}},
		{[]string{"bench", "generator", "--only", "recv", "--conns", "2", "--duration", "300ms"},
			[]string{"record none", "record plain", "record gz", "msgs/s"}},
		{[]string{"bench", "generator", "--only", "idle", "--idle", "300"},
			[]string{"300 connections held (0 connect errors)", "per connection:"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, exe, tt.args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%v: %v\n%s", tt.args, err, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out)
			}
		}
		if pandasRuns == "1" && tt.args[1] == "analyze" && !strings.Contains(string(out), "cross-check: 3 steps, same counts") {
			t.Errorf("the analyzer and pandas disagree:\n%s", out)
		}
	}
}

// TestScenarioFilesSmoke runs every scenario file of scenarios/ whose
// servers this binary starts (none named: its serve) with scalechat bench
// --smoke FILE, as CI does: a benchmark added as one file is checked with
// no Go change. Files naming other servers (Bun, a TLS front) are left to
// scalechat bench compare's own tests.
func TestScenarioFilesSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and load generators for every scenario file")
	}
	exe := buildScalechat(t)
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	ran := 0
	for _, file := range files {
		sc, err := loadtest.LoadScenario(file, loadtest.DefaultStep())
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if !ownTargets(sc.Targets) || !sc.Bench.IsZero() {
			continue // a benchmark file is a named scenario: TestSmoke runs it
		}
		ran++
		t.Run(filepath.Base(file), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, "bench", "--smoke", "--dir", t.TempDir(), file)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("bench --smoke %s: %v\n%s", file, err, out)
			}
			if !strings.Contains(string(out), "scalechat bench compare "+sc.Name) {
				t.Errorf("no table:\n%s", out)
			}
			if len(sc.SLO) > 0 && !strings.Contains(string(out), "objectives of "+file+" are not judged") {
				t.Errorf("a smoke run judged the file's objectives:\n%s", out)
			}
		})
	}
	if ran < 2 {
		t.Errorf("%d scenario files ran, want compare.yaml and more", ran)
	}
}

// ownTargets reports whether every target is started from this binary
// ({scalechat}), or there is none (then the bench starts its serve).
func ownTargets(ts []loadtest.Target) bool {
	for _, tg := range ts {
		if len(tg.Command) == 0 || tg.Command[0] != "{scalechat}" {
			return false
		}
	}
	return true
}

// TestScenarioFileObjectives: scalechat bench FILE judges the run against
// the file's objectives (slo:), exits 3 when one is missed, and with
// --json writes a results file whose row carries them and the verdict.
func TestScenarioFileObjectives(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and a load generator")
	}
	exe := buildScalechat(t)
	file := filepath.Join(t.TempDir(), "tiny.yaml")
	spec := "name: tiny\nslo: [\"delivery>=100%\", \"p99<0.001ms\"]\n" +
		"defaults: {msg_frequency: 1s, msg_size: 256, duration: 1s, ramp: 2000, drain: 2s}\nsteps:\n  - {name: r5x4, rooms: 5, room_size: 4}\n"
	jsonFile := filepath.Join(t.TempDir(), "tiny.json")
	out := benchMissed(t, exe, file, spec, jsonFile)
	for _, want := range []string{"SLO scalechat/r5x4 delivery>=100%: MET", "SLO scalechat/r5x4 p99<0.001ms: MISSED"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	f, err := results.ReadBenchFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if r := f.Rows[0]; len(f.Rows) != 1 || r.Scenario != "tiny scalechat/r5x4" || r.Target != "delivery>=100%, p99<0.001ms" || r.Verdict != "missed" || r.PerSecond <= 0 {
		t.Errorf("results file rows %+v", f.Rows)
	}
	if f.Host.Cores < 1 || !strings.HasSuffix(f.Command, file) {
		t.Errorf("results file host %+v, command %q", f.Host, f.Command)
	}
}

// TestBenchFileSpec: scalechat bench FILE runs a benchmark file (one with
// a bench: section) as the named scenarios run: its rows named by its
// row:, judged against its objectives (exit 3 when one is missed), its
// figures: rows after, all in the results file.
func TestBenchFileSpec(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and load generators")
	}
	exe := buildScalechat(t)
	file := filepath.Join(t.TempDir(), "mine.yaml")
	spec := "name: mine\nslo: [\"delivery>=100%\", \"a:p99<0.001ms\"]\n" +
		"defaults: {msg_frequency: 1s, msg_size: 256, duration: 1s, ramp: 2000, drain: 2s}\nsteps:\n" +
		"  - {name: a, rooms: 5, room_size: 4}\n  - {name: b, rooms: 2, room_size: 10}\n" +
		"bench: {row: \"mine {rooms}×{room_size}\", figure: [deliveries_per_s], figures: [{name: \"mine: b vs a\", ratio: [b, a], of: deliveries_per_s}]}\n"
	jsonFile := filepath.Join(t.TempDir(), "mine.json")
	out := benchMissed(t, exe, file, spec, jsonFile)
	f, err := results.ReadBenchFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, target, verdict string }{
		{"mine 5×4", "delivery>=100%, p99<0.001ms", "MISSED"},
		{"mine 2×10", "delivery>=100%", "met"},
		{"mine: b vs a", "", ""},
	}
	if len(f.Rows) != len(want) {
		t.Fatalf("rows %+v\n%s", f.Rows, out)
	}
	for i, w := range want {
		r := f.Rows[i]
		if r.Scenario != w.name || r.Target != w.target || r.Verdict != w.verdict {
			t.Errorf("row %d: %q %q %q, want %+v", i, r.Scenario, r.Target, r.Verdict, w)
		}
	}
	if f.Rows[0].PerSecond <= 0 || !strings.HasPrefix(f.Rows[2].Figure, "deliveries/s ×") || !strings.Contains(f.Rows[0].Note, "p99 = ") {
		t.Errorf("figures: %+v", f.Rows)
	}
}

// benchMissed writes spec to file, runs scalechat bench --json jsonFile
// FILE, and fails the test unless it exits 3 (an objective missed); it
// returns the output.
func benchMissed(t *testing.T, exe, file, spec, jsonFile string) []byte {
	t.Helper()
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "bench", "--dir", t.TempDir(), "--json", jsonFile, file).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3 (an objective missed):\n%s", err, out)
	}
	return out
}

// A scenario whose server CPU held too few clock ticks shows "–" for its
// µs per delivery, in the figure and the table, with the reason under it
// and in the JSON file.
func TestCPUPerDeliveryOfTooFewTicks(t *testing.T) {
	tests := []struct {
		name       string
		cpu        time.Duration
		deliveries int64
		want       float64
		short      bool
	}{
		{"no delivery", time.Second, 0, 0, false},
		{"one tick", 10 * time.Millisecond, 80, 0, true},
		{"nine ticks", 90 * time.Millisecond, 80, 0, true},
		{"ten ticks", 100 * time.Millisecond, 80, 1250, false},
	}
	for _, tt := range tests {
		got, note := perDelivery(tt.cpu, tt.deliveries)
		if got != tt.want || (note != "") != tt.short {
			t.Errorf("%s: perDelivery = %v, %q", tt.name, got, note)
		}
	}
	_, note := perDelivery(20*time.Millisecond, 160)
	row := Result{Scenario: "rooms 10×4", Ratio: 1, CPUNote: note}
	row.Figure = perDelFigure(row)
	var b bytes.Buffer
	PrintTable(&b, []Result{row})
	out := b.String()
	for _, want := range []string{"– µs/deliv", "  rooms 10×4: CPU/delivery: – (2 CPU clock ticks of 10 ms, fewer than the 10 that read it to 10 %)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "125") {
		t.Errorf("the figure of two ticks is printed:\n%s", out)
	}
	if f := benchFile([]Result{row}, time.Now(), "", "", false, true); f.Rows[0].CPUNote != note || f.Rows[0].CPUPerDel != 0 {
		t.Errorf("bench JSON row %+v", f.Rows[0])
	}
}
