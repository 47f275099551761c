package results

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTargetsFiles(t *testing.T) {
	rows := []TargetRow{{Target: "a,b", Protocol: "legacy", Step: "s1", Clients: 4, Received: 40, Ratio: 1, P99: 1.5, CPUPerDelivery: 12.25, Saturated: true, CPUPerConnect: 180.5, Note: "slow; see x"}}
	var b bytes.Buffer
	if err := WriteTargetsCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || strings.Join(recs[0], ",") != TargetsHeader || len(recs[1]) != len(recs[0]) ||
		recs[1][0] != "a,b" || recs[1][16] != "12.250" || recs[1][20] != "true" || recs[1][21] != "180.500" || recs[1][22] != "slow; see x" {
		t.Errorf("targets.csv = %q", recs)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, TargetsJSON)
	j, _ := json.Marshal(Targets{Scenario: "x", Rows: rows})
	os.WriteFile(p, j, 0o644)
	got, err := ReadTargets(p)
	if err != nil || len(got.Rows) != 1 || got.Rows[0] != rows[0] {
		t.Errorf("ReadTargets = %+v, %v", got, err)
	}
	j, _ = json.Marshal(Targets{Scenario: "x"})
	os.WriteFile(p, j, 0o644)
	if _, err := ReadTargets(p); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Errorf("no rows: %v", err)
	}
}

func TestTargetRowFailure(t *testing.T) {
	for _, tt := range []struct {
		name string
		row  TargetRow
		want string
	}{
		{"run failed", TargetRow{Target: "a", Note: "FAILED: exited"}, "the run failed"},
		{"nobody connected", TargetRow{Target: "a", Step: "s1", Clients: 10, Errors: 10}, "connected nobody"},
		{"nothing delivered", TargetRow{Target: "a", Step: "s1", Clients: 10, Joined: 10, Sent: 50, Expected: 500}, "delivered nothing"},
		{"hold only", TargetRow{Target: "a", Step: "s1", Clients: 10, Joined: 10}, ""},
		{"measured", TargetRow{Target: "a", Step: "s1", Clients: 10, Joined: 10, Sent: 50, Expected: 500, Received: 1}, ""},
	} {
		if got := tt.row.Failure(); got != tt.want {
			t.Errorf("%s: Failure() = %q, want %q", tt.name, got, tt.want)
		}
	}
	for _, tt := range []struct {
		row  TargetRow
		want bool
	}{
		{TargetRow{Joined: 10, RSS: 1 << 20}, true},
		{TargetRow{Joined: 0, RSS: 1 << 20}, false}, // connected nobody
		{TargetRow{Joined: 10}, false},              // no server process sampled
	} {
		if got := tt.row.MemoryMeasured(); got != tt.want {
			t.Errorf("%+v: MemoryMeasured() = %v, want %v", tt.row, got, tt.want)
		}
	}
	ts := Targets{Rows: []TargetRow{{Target: "a", Step: "s1", Joined: 1, Sent: 1, Received: 1}, {Target: "b", Step: "s1"}, {Target: "b", Step: "s2"}, {Target: "c"}}}
	if got := strings.Join(ts.Failed(), ","); got != "b,c" {
		t.Errorf("Failed() = %s, want b,c", got)
	}
}
