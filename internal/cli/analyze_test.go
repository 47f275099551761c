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
	// The original client, connected to a server that sends control frames,
	// logs them as chat messages: message_id 0, no sender.
	onlyIgnored := filepath.Join(dir, "ignored.csv")
	os.WriteFile(onlyIgnored, []byte("0,,3bb67e68-e26f-49c8-93fd-5df1afd7eda9,Received,1795238808000695\n"), 0o644)
	garbage := filepath.Join(dir, "garbage.csv")
	os.WriteFile(garbage, []byte("1,a,b,Sent,1795238808000000\n1,a,b,Received,1795238808000100\nnot,a,row\n"), 0o644)
	steps := func(name, file string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("1,1,"+file+"\n"), 0o644)
		return p
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", filepath.Join(dir, "nope.csv")}, "no such file"},
		{[]string{"analyze", headerless}, "needs --steps"},
		{[]string{"analyze"}, "no input"},
		{[]string{"report", headerless}, "--out DIR is required"},
		{[]string{"analyze", "--steps", steps("s1.txt", onlyIgnored)}, "none of the 1 rows is a chat event"},
		{[]string{"analyze", "--steps", steps("s2.txt", garbage)}, "1 of 3 rows are malformed (33.33 %), more than --max-malformed 1.00 %"},
	} {
		code, _, stderr := runCLI(tt.args...)
		if code == 0 || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: code %d stderr %q, want one line with %q", tt.args, code, stderr, tt.want)
		}
	}
}

func TestAnalyzeMaxMalformed(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.csv")
	os.WriteFile(garbage, []byte("1,a,b,Sent,1795238808000000\n1,a,b,Received,1795238808000100\nnot,a,row\n"), 0o644)
	st := filepath.Join(dir, "steps.txt")
	os.WriteFile(st, []byte("1,1,garbage.csv\n"), 0o644)
	code, stdout, stderr := runCLI("analyze", "--max-malformed", "50", "--steps", st)
	if code != 0 || !strings.Contains(stdout, "1 malformed rows skipped") {
		t.Errorf("code %d\n%s\n%s", code, stdout, stderr)
	}
}
