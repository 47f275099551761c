package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cliRun = `step,room,message_id,sender_id,client_id,event,unix_us,lag_us
s1,r0,,,0,Joined,1763719200000000,
s1,r0,,,1,Joined,1763719200000900,
s1,r0,1,0,0,Sent,1763719201000000,41
s1,r0,1,0,0,Received,1763719201000380,
s1,r0,1,0,1,Received,1763719201000412,
`

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestAnalyzeAndReportCommands(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "run.csv")
	if err := os.WriteFile(csv, []byte(cliRun), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	code, stdout, stderr := runCLI("analyze", "--out", out, csv)
	if code != 0 || !strings.Contains(stdout, "p99_ms") || stderr != "" {
		t.Fatalf("analyze: code %d\n%s\n%s", code, stdout, stderr)
	}
	// p50 of 380 and 412 µs is 380 µs (nearest rank).
	if !strings.Contains(stdout, "0.380") {
		t.Errorf("analyze table lacks p50 0.380:\n%s", stdout)
	}
	for _, f := range []string{"summary.csv", "summary.json", "timeseries.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	rep := filepath.Join(dir, "report")
	if code, stdout, stderr := runCLI("report", "--out", rep, out); code != 0 || !strings.Contains(stdout, "index.html") {
		t.Fatalf("report: code %d\n%s\n%s", code, stdout, stderr)
	}
	for _, f := range []string{"index.html", "latency_percentiles.png", "summary.json"} {
		if _, err := os.Stat(filepath.Join(rep, f)); err != nil {
			t.Error(err)
		}
	}
	rep2 := filepath.Join(dir, "report2")
	if code, _, stderr := runCLI("report", "--out", rep2, csv); code != 0 {
		t.Fatalf("report from CSV: code %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(rep2, "summary.csv")); err != nil {
		t.Error(err)
	}
}

func TestAnalyzeErrors(t *testing.T) {
	dir := t.TempDir()
	headerless := filepath.Join(dir, "old.csv")
	os.WriteFile(headerless, []byte("1,0,0,Sent,1\n"), 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", filepath.Join(dir, "nope.csv")}, "no such file"},
		{[]string{"analyze", headerless}, "needs --steps"},
		{[]string{"analyze"}, "no input"},
		{[]string{"report", headerless}, "--out DIR is required"},
	} {
		code, _, stderr := runCLI(tt.args...)
		if code == 0 || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: code %d stderr %q, want one line with %q", tt.args, code, stderr, tt.want)
		}
	}
}
