//go:build linux

package loadtest

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

func testStep(name string, rooms, size int) Step {
	return Step{Name: name, Rooms: rooms, RoomSize: size, RoomsPerClient: 1, MsgFrequency: Duration(100 * time.Millisecond),
		MsgSize: 64, Duration: Duration(time.Second), Ramp: 5000, Drain: Duration(3 * time.Second)}
}

func testConfig(t *testing.T, url string, steps ...Step) *Config {
	cfg := &Config{URL: url, Steps: steps, RoomPrefix: fmt.Sprintf("t%d", time.Now().UnixNano()), Seed: 1, Loops: 2,
		ConnectTimeout: Duration(5 * time.Second), Out: filepath.Join(t.TempDir(), "run.csv"), Pause: Duration(100 * time.Millisecond)}
	return cfg
}

func runTest(t *testing.T, cfg *Config) *Result {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, context.Background(), cfg, Options{Stdout: io.Discard, Stderr: testWriter{t}, Machine: InspectMachine()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// csvRow is a parsed events row.
type csvRow struct {
	step, room, event     string
	msgID, sender, client uint64
	hasMsg                bool
	unixUs, lag           int64
	hasLag                bool
}

// readCSV parses every line of an events file strictly.
func readCSV(t *testing.T, path string) []csvRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = gz
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end with a whole row", path)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	var rows []csvRow
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			if sc.Text()+"\n" != results.EventsHeader+"\n" {
				t.Fatalf("header %q", sc.Text())
			}
			continue
		}
		row, err := parseRow(sc.Text())
		if err != nil {
			t.Fatalf("%s line %d %q: %v", path, line, sc.Text(), err)
		}
		rows = append(rows, row)
	}
	return rows
}

func parseRow(s string) (csvRow, error) {
	f := strings.Split(s, ",")
	if len(f) != 8 {
		return csvRow{}, fmt.Errorf("%d fields", len(f))
	}
	r := csvRow{step: f[0], room: f[1], event: f[5]}
	var err error
	if r.client, err = strconv.ParseUint(f[4], 10, 64); err != nil {
		return r, fmt.Errorf("client_id: %w", err)
	}
	if r.unixUs, err = strconv.ParseInt(f[6], 10, 64); err != nil {
		return r, fmt.Errorf("unix_us: %w", err)
	}
	switch r.event {
	case results.JoinedName:
		if f[2] != "" || f[3] != "" || f[7] != "" {
			return r, fmt.Errorf("joined row with message fields")
		}
		return r, nil
	case results.SentName, results.ReceivedName:
	default:
		return r, fmt.Errorf("event %q", r.event)
	}
	r.hasMsg = true
	if r.msgID, err = strconv.ParseUint(f[2], 10, 64); err != nil {
		return r, fmt.Errorf("message_id: %w", err)
	}
	if r.sender, err = strconv.ParseUint(f[3], 10, 64); err != nil {
		return r, fmt.Errorf("sender_id: %w", err)
	}
	if r.event == results.SentName {
		if r.lag, err = strconv.ParseInt(f[7], 10, 64); err != nil {
			return r, fmt.Errorf("lag_us: %w", err)
		}
		r.hasLag = true
	} else if f[7] != "" {
		return r, fmt.Errorf("lag on a received row")
	}
	return r, nil
}

type msgKey struct{ sender, id uint64 }

// checkCSVAgainstMeta recounts the rows and compares with meta.json the way
// analyze will: expected deliveries from Joined rows.
func checkCSVAgainstMeta(t *testing.T, rows []csvRow, meta results.Meta) {
	t.Helper()
	type stepRoom struct{ step, room string }
	members := map[stepRoom]int64{}
	sent := map[string]int64{}
	recv := map[string]int64{}
	expected := map[string]int64{}
	joined := map[string]int64{}
	joinedClients := map[msgKey]bool{} // (client, step index) pairs
	stepIdx := map[string]uint64{}
	sentMsgs := map[msgKey]string{}
	for _, r := range rows {
		switch r.event {
		case results.JoinedName:
			members[stepRoom{r.step, r.room}]++
			if _, ok := stepIdx[r.step]; !ok {
				stepIdx[r.step] = uint64(len(stepIdx))
			}
			if k := (msgKey{r.client, stepIdx[r.step]}); !joinedClients[k] {
				joinedClients[k] = true
				joined[r.step]++
			}
		case results.SentName:
			sent[r.step]++
			if r.sender != r.client {
				t.Fatalf("sent row with sender %d != client %d", r.sender, r.client)
			}
			if _, dup := sentMsgs[msgKey{r.sender, r.msgID}]; dup {
				t.Fatalf("message (%d,%d) sent twice", r.sender, r.msgID)
			}
			sentMsgs[msgKey{r.sender, r.msgID}] = r.room
		}
	}
	for _, r := range rows {
		switch r.event {
		case results.SentName:
			expected[r.step] += members[stepRoom{r.step, r.room}]
		case results.ReceivedName:
			recv[r.step]++
			room, ok := sentMsgs[msgKey{r.sender, r.msgID}]
			if !ok {
				t.Fatalf("orphan received row %+v", r)
			}
			if room != r.room {
				t.Fatalf("received in room %s, sent into %s", r.room, room)
			}
		}
	}
	for _, s := range meta.Steps {
		if sent[s.Name] != s.Sent || recv[s.Name] != s.Received || expected[s.Name] != s.Expected || joined[s.Name] != s.Joined {
			t.Errorf("step %s: csv sent %d recv %d expected %d joined %d; meta sent %d recv %d expected %d joined %d",
				s.Name, sent[s.Name], recv[s.Name], expected[s.Name], joined[s.Name], s.Sent, s.Received, s.Expected, s.Joined)
		}
	}
}

func readMeta(t *testing.T, out string) results.Meta {
	t.Helper()
	mp, _ := results.Paths(out, 1)
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	var m results.Meta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLosslessAgainstFakeServer(t *testing.T) {
	srv := startFakeServer(t, nil)
	cfg := testConfig(t, srv.URL, testStep("even", 5, 4))
	res := runTest(t, cfg)
	if len(res.Failures) > 0 {
		t.Fatalf("failures: %v", res.Failures)
	}
	s := res.Meta.Steps[0]
	// 20 clients, every 100 ms for 1 s: 10 messages each, 4 recipients each.
	if s.Sent != 200 || s.Expected != 800 || s.Received != 800 || s.Joined != 20 || s.Lost != 0 {
		t.Fatalf("step %+v", s)
	}
	if s.LatencyMs.P50 <= 0 || s.LatencyMs.Max < s.LatencyMs.P99 {
		t.Errorf("latency %+v", s.LatencyMs)
	}
	checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
}

func TestRoomsPerClientAndSkew(t *testing.T) {
	srv := startFakeServer(t, nil)
	st := testStep("topics", 10, 3)
	st.RoomsPerClient = 4
	st.RoomSkew = 1
	cfg := testConfig(t, srv.URL+"/", st)
	cfg.Out += ".gz"
	res := runTest(t, cfg)
	if len(res.Failures) > 0 {
		t.Fatalf("failures: %v", res.Failures)
	}
	s := res.Meta.Steps[0]
	if s.Joined != 30 || s.Sent != 300 || s.Received != s.Expected || s.Expected <= s.Sent {
		t.Fatalf("step %+v", s)
	}
	rows := readCSV(t, cfg.Out)
	checkCSVAgainstMeta(t, rows, readMeta(t, cfg.Out))
}

func TestLossyServerIsDetected(t *testing.T) {
	srv := startFakeServer(t, func(s *fakeServer) { s.dropEvery = 50 })
	cfg := testConfig(t, srv.URL, testStep("lossy", 4, 5))
	cfg.Steps[0].Drain = Duration(500 * time.Millisecond)
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if s.Lost == 0 || s.Lost != s.Expected-s.Received || len(res.Failures) == 0 {
		t.Fatalf("loss not detected: %+v, failures %v", s, res.Failures)
	}
	if !strings.Contains(strings.Join(res.Failures, "\n"), "lost") {
		t.Errorf("failures %v do not mention loss", res.Failures)
	}
	// Within --max-loss the same loss passes.
	if f := stepFailures(s, 0.5, 0); len(f) != 0 {
		t.Errorf("failures with max loss 50%%: %v", f)
	}
	checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
}

// A message the server gives up (error frame unavailable) is counted as
// such, apart from the rate limit's refusals.
func TestUnavailableIsCounted(t *testing.T) {
	srv := startFakeServer(t, func(s *fakeServer) { s.refuseEvery = 10 })
	cfg := testConfig(t, srv.URL, testStep("refused", 4, 5))
	cfg.Steps[0].Drain = Duration(500 * time.Millisecond)
	s := runTest(t, cfg).Meta.Steps[0]
	if s.Unavailable == 0 || s.Unavailable != s.ServerErrors || s.RateLimited != 0 || s.Unavailable != srv.messages.Load()/10 {
		t.Errorf("unavailable %d, server errors %d, rate limited %d, messages %d", s.Unavailable, s.ServerErrors, s.RateLimited, srv.messages.Load())
	}
}

// A server past its capacity refuses messages, with error frames that
// leave their connections open, and then drops its clients: the reason
// given beside the drops is why they were dropped, not the first refusal.
func TestDisconnectsKeepTheirOwnReason(t *testing.T) {
	srv := startFakeServer(t, func(s *fakeServer) { s.kickAt = 3 })
	cfg := testConfig(t, srv.URL, testStep("kicked", 2, 5))
	cfg.Steps[0].Drain = Duration(300 * time.Millisecond)
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	const why = `the server closed the connection with code 1013: "overloaded"`
	if s.Disconnects != 10 || s.ServerErrors < 20 || s.FirstError != why {
		t.Errorf("%d disconnects, %d error frames, first error %q; want 10, at least 20, %q", s.Disconnects, s.ServerErrors, s.FirstError, why)
	}
	if !strings.HasPrefix(s.FirstServerError, "server error: ") || !strings.Contains(s.FirstServerError, `"unavailable"`) {
		t.Errorf("first server error %q, want the first refusal", s.FirstServerError)
	}
	if f := strings.Join(res.Failures, "\n"); !strings.Contains(f, "10 connections dropped during the step (first error: "+why+")") {
		t.Errorf("failures %q do not give why the connections dropped", f)
	}
}

func TestSlowServerIsDetected(t *testing.T) {
	// Every write waits 30 ms: a connection takes 33 messages a second but
	// its room of 5 members sends it 50.
	srv := startFakeServer(t, func(s *fakeServer) { s.delay = 30 * time.Millisecond })
	cfg := testConfig(t, srv.URL, testStep("slow", 4, 5))
	cfg.Steps[0].Drain = Duration(300 * time.Millisecond)
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if s.Lost == 0 || len(res.Failures) == 0 {
		t.Fatalf("slow server not detected: %+v", s)
	}
	if s.LatencyMs.P99 < 50 {
		t.Errorf("p99 %.1f ms, want the queueing to show", s.LatencyMs.P99)
	}
}

func TestHistoryIsNotADelivery(t *testing.T) {
	srv := startFakeServer(t, nil)
	// Two steps with the same rooms (fixed prefix, one run id) would see
	// the history; here the second run reuses the first run's prefix.
	cfg := testConfig(t, srv.URL, testStep("a", 2, 3))
	runTest(t, cfg)
	cfg2 := testConfig(t, srv.URL, testStep("a", 2, 3))
	cfg2.RoomPrefix = cfg.RoomPrefix
	res := runTest(t, cfg2)
	s := res.Meta.Steps[0]
	if len(res.Failures) > 0 || s.Replayed == 0 || s.Received != s.Expected {
		t.Fatalf("history handling: %+v failures %v", s, res.Failures)
	}
}

func TestScenarioThreeSteps(t *testing.T) {
	srv := startFakeServer(t, nil)
	sc, err := ParseScenario([]byte(`
name: three
pause: 100ms
defaults: {msg_frequency: 200ms, msg_size: 32, duration: 600ms, ramp: 5000, drain: 2s}
steps:
  - {name: n2, rooms: 1, room_size: 2}
  - {name: n4, rooms: 1, room_size: 4}
  - {rooms: 2, room_size: 3, msg_frequency: 0}
`), testStep("x", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, srv.URL, sc.Steps...)
	cfg.Pause = *sc.Pause
	res := runTest(t, cfg)
	if len(res.Failures) > 0 {
		t.Fatal(res.Failures)
	}
	var names []string
	for _, s := range res.Meta.Steps {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "n2,n4,s3" {
		t.Fatalf("steps %v", names)
	}
	if s := res.Meta.Steps[2]; s.Sent != 0 || s.Joined != 6 {
		t.Errorf("hold step %+v", s)
	}
	rows := readCSV(t, cfg.Out)
	steps := map[string]bool{}
	ids := map[string]map[uint64]bool{}
	for _, r := range rows {
		steps[r.step] = true
		if ids[r.step] == nil {
			ids[r.step] = map[uint64]bool{}
		}
		ids[r.step][r.client] = true
	}
	if len(steps) != 3 {
		t.Errorf("csv steps %v", steps)
	}
	// Client ids are unique across the steps of a run.
	for id := range ids["n2"] {
		if ids["n4"][id] || ids["s3"][id] {
			t.Errorf("client id %d in two steps", id)
		}
	}
	checkCSVAgainstMeta(t, rows, readMeta(t, cfg.Out))
}

func TestEchoProtocol(t *testing.T) {
	srv := startFakeServer(t, func(s *fakeServer) { s.echo = true })
	cfg := testConfig(t, srv.URL+"/echo", testStep("echo", 3, 2))
	cfg.Protocol = ProtocolEcho
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if len(res.Failures) > 0 || s.Sent != 60 || s.Expected != 60 || s.Received != 60 {
		t.Fatalf("echo: %+v %v", s, res.Failures)
	}
	checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
}

func TestConnectErrorsFailTheRun(t *testing.T) {
	// Nothing listens on this port.
	cfg := testConfig(t, "ws://127.0.0.1:1/ws", testStep("refused", 2, 2))
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if s.ConnectErrors != 4 || len(res.Failures) == 0 || !strings.Contains(s.FirstError, "refused") {
		t.Fatalf("step %+v failures %v", s, res.Failures)
	}
}

func TestShardsSplitTheScenario(t *testing.T) {
	srv := startFakeServer(t, nil)
	prefix := fmt.Sprintf("sh%d", time.Now().UnixNano())
	var total results.Meta
	var rows []csvRow
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan *Result, 2)
	cfgs := make([]*Config, 2)
	for i := range cfgs {
		cfg := testConfig(t, srv.URL, testStep("sh", 3, 4))
		cfg.RoomPrefix, cfg.Shard, cfg.Shards = prefix, i, 2
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		cfgs[i] = cfg
		go func() {
			res, err := Run(ctx, context.Background(), cfg, Options{Stdout: io.Discard, Stderr: io.Discard, Machine: InspectMachine()})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
	}
	for range cfgs {
		res := <-done
		if res == nil {
			t.FailNow()
		}
		total.Steps = append(total.Steps, res.Meta.Steps...)
	}
	var clients int64
	for _, s := range total.Steps {
		clients += s.LocalClients
		if s.Received != s.Expected || s.Expected == 0 {
			t.Errorf("shard step %+v", s)
		}
	}
	if clients != 12 {
		t.Errorf("shards ran %d clients, want 12", clients)
	}
	for _, cfg := range cfgs {
		rows = append(rows, readCSV(t, cfg.Out)...)
	}
	// Together the parts hold every delivery: each message reaches all 4
	// members of its room whichever shard they are in.
	var sent, recv int64
	for _, r := range rows {
		switch r.event {
		case results.SentName:
			sent++
		case results.ReceivedName:
			recv++
		}
	}
	if sent == 0 || recv != 4*sent {
		t.Errorf("merged shards: sent %d received %d, want 4×", sent, recv)
	}
}

func TestMachineCheckRefusesImpossiblePlan(t *testing.T) {
	m := Machine{Machine: results.Machine{NofileSoft: 1000, NofileHard: 1000, EphemeralPorts: "40000-40999"}, portsLo: 40000, portsHi: 40999}
	tests := []struct {
		name    string
		clients int
		workers int
		sources int
		want    string
	}{
		{"fits", 900, 1, 0, ""},
		{"too many files", 5000, 1, 0, "open-file limit is 1000: use --workers"},
		{"workers fix files, not ports", 5000, 6, 0, "ephemeral ports"},
		{"workers and sources", 5000, 6, 5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{Steps: []Step{{Rooms: tt.clients, RoomSize: 1}}, Workers: tt.workers, Shards: 1}
			for i := range tt.sources {
				a, _ := ParseSourceIPs(fmt.Sprintf("127.0.0.%d", i+1))
				cfg.SourceIPs = append(cfg.SourceIPs, a...)
			}
			err := m.Check(cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// --clients spreads clients over more rooms than clients, --senders makes
// only some send, meta.json gets connect times and the sending window, and
// --no-csv writes no events file.
func TestClientsSendersConnectTimesNoCSV(t *testing.T) {
	srv := startFakeServer(t, nil)
	st := testStep("few", 8, 1)
	st.NumClients, st.Senders, st.RoomsPerClient = 6, 2, 3
	cfg := testConfig(t, srv.URL, st)
	cfg.NoCSV = true
	res := runTest(t, cfg)
	if len(res.Failures) > 0 {
		t.Fatalf("failures: %v", res.Failures)
	}
	s := res.Meta.Steps[0]
	// 2 senders × 10 messages (every 100 ms for 1 s), each to every member of its room.
	if s.Clients != 6 || s.Joined != 6 || s.Sent != 20 || s.Received != s.Expected || s.Expected < s.Sent || s.Senders != 2 {
		t.Fatalf("step %+v", s)
	}
	if s.ConnectMs.P50 <= 0 || s.ConnectMs.Max < s.ConnectMs.P99 || s.ConnectMs.Max > 5000 {
		t.Errorf("connect times %+v", s.ConnectMs)
	}
	if s.SendStartedAt.Before(s.StartedAt) || !s.SendEndedAt.After(s.SendStartedAt) || s.SendEndedAt.After(s.EndedAt) ||
		s.SendEndedAt.Sub(s.SendStartedAt) < time.Second {
		t.Errorf("sending window %v – %v within step %v – %v", s.SendStartedAt, s.SendEndedAt, s.StartedAt, s.EndedAt)
	}
	if _, err := os.Stat(cfg.Out); !os.IsNotExist(err) {
		t.Errorf("--no-csv wrote %s (%v)", cfg.Out, err)
	}
	m := readMeta(t, cfg.Out)
	if len(m.Parts) != 0 || len(m.Steps) != 1 || m.Steps[0].ConnectMs != s.ConnectMs {
		t.Errorf("meta.json parts %v steps %+v", m.Parts, m.Steps)
	}
}

// The summary shows the server's refusals: a step whose messages the
// server refused (a cluster past its capacity answers unavailable) is not a
// silent loss with 0 errors beside it.
func TestSummaryShowsRefusals(t *testing.T) {
	for _, tt := range []struct {
		name    string
		step    results.StepMeta
		refused string // the refused column's value
		line    bool   // the line that says what they are
	}{
		{"none refused", results.StepMeta{Name: "s1", Sent: 10, Expected: 20, Received: 20, DeliveryRatio: 1}, "0", false},
		{"refused", results.StepMeta{Name: "s1", Sent: 10, Expected: 20, Received: 8, DeliveryRatio: 0.4,
			ServerErrors: 6, Unavailable: 5, RateLimited: 1, FirstServerError: "server error: unavailable"}, "6", true},
	} {
		var b strings.Builder
		printSummary(&b, &Result{Meta: results.Meta{Steps: []results.StepMeta{tt.step}}})
		lines := strings.Split(b.String(), "\n")
		head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
		col := slices.Index(head, "refused")
		if col < 0 || len(row) != len(head) || row[col] != tt.refused {
			t.Errorf("%s: header %q, row %q: want refused %s", tt.name, head, row, tt.refused)
		}
		said := strings.Contains(b.String(), "the server refused 6 messages with an error frame (5 unavailable") &&
			strings.Contains(b.String(), "(first: server error: unavailable)")
		if said != tt.line {
			t.Errorf("%s: the refusals told %v, want %v:\n%s", tt.name, said, tt.line, b.String())
		}
	}
}
