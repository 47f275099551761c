package analyze

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// FuzzParseRow: no input crashes the row parsers, and a row they accept
// prints back to a line that parses to the same values.
//
//	go test ./internal/analyze -run '^$' -fuzz '^FuzzParseRow$' -fuzztime 30s
func FuzzParseRow(f *testing.F) {
	for _, s := range []string{
		"s1,r0,,,0,Joined,1763719200000000,",
		"s1,r0,1,0,0,Sent,1763719201000000,41",
		"s1,r0,1,0,1,Received,1763719201000412,",
		"s1,r0,1,0,1,Received,1763719",
		"1,0,0,Sent,1763719201000000",
		"1,0,5,Received,1763719201000380\r",
		results.EventsHeader,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var r Row
		if ParseRow(line, &r) == nil {
			lag := ""
			if r.HasLag {
				lag = fmt.Sprint(r.LagUS)
			}
			msg, sender := fmt.Sprint(r.Message), fmt.Sprint(r.Sender)
			if r.Kind == results.Joined && r.Message == 0 && r.Sender == 0 {
				msg, sender = "", ""
			}
			again := fmt.Sprintf("%s,%s,%s,%s,%d,%s,%d,%s", r.Step, r.Room, msg, sender, r.Client, r.Kind, r.UnixUS, lag)
			var r2 Row
			if err := ParseRow([]byte(again), &r2); err != nil || !sameRow(r, r2) || string(r2.StepRoom) != string(r.StepRoom) {
				t.Fatalf("%q parsed to %+v; printed %q parsed to %+v, %v", line, r, again, r2, err)
			}
			if r.UnixUS < 0 {
				t.Fatalf("negative unix_us %d", r.UnixUS)
			}
		}
		if ParseOldRow(line, &r) == nil {
			again := fmt.Sprintf("%d,%d,%d,%s,%d", r.Message, r.Sender, r.Client, r.Kind, r.UnixUS)
			var r2 Row
			if err := ParseOldRow([]byte(again), &r2); err != nil || !sameRow(r, r2) {
				t.Fatalf("old %q parsed to %+v; printed %q parsed to %+v, %v", line, r, again, r2, err)
			}
		}
	})
}

// FuzzAnalyze: any file content is analysed without error or crash (bad
// rows are counted), and the counts stay consistent.
//
//	go test ./internal/analyze -run '^$' -fuzz '^FuzzAnalyze$' -fuzztime 30s
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte(goldenRun))
	f.Add([]byte(results.EventsHeader + "\ns,r,,,1,Joined,5,\ns,r,1,1,1,Sent,10,\ns,r,1,1,1,Received,9,\n"))
	f.Add([]byte(results.EventsHeader + "\ns,r,1,1,1,Received,9223372036854775807,\ns,r,1,1,1,Sent,0,\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p := filepath.Join(t.TempDir(), "f.csv")
		content := append([]byte(results.EventsHeader+"\n"), body...)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), Options{Inputs: []Input{{Path: p}}, Workers: 2})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		var rows int64
		for _, s := range res.Steps {
			if s.Received < 0 || s.Lost < 0 || s.Lost > s.Expected || s.Orphans < 0 {
				t.Fatalf("inconsistent step %+v", s)
			}
			rows += s.Sent + s.Received + s.Orphans + s.Duplicates
		}
		if rows > res.Rows || res.Bytes != int64(len(content)) {
			t.Fatalf("rows %d of %d, bytes %d of %d", rows, res.Rows, res.Bytes, len(content))
		}
	})
}
