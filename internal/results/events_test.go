package results

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEventRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		e    Event
		line string
	}{
		{Event{Step: "s1", Room: "p-s1-r3", Kind: Sent, MessageID: 7, SenderID: 2, ClientID: 2, UnixUS: 1763719201000000, LagUS: 41},
			"s1,p-s1-r3,7,2,2,Sent,1763719201000000,41"},
		{Event{Step: "s1", Room: "p-s1-r3", Kind: Joined, ClientID: 5, UnixUS: 1763719200000000, LagUS: -1},
			"s1,p-s1-r3,,,5,Joined,1763719200000000,"},
		{Event{Step: "ramp 2", Room: "r", Kind: Received, MessageID: 7, SenderID: 2, ClientID: 9, UnixUS: 1763719201000380, LagUS: -1},
			"ramp 2,r,7,2,9,Received,1763719201000380,"},
	} {
		got := string(AppendEvent(nil, &tt.e))
		if got != tt.line+"\n" {
			t.Errorf("AppendEvent(%+v) = %q, want %q", tt.e, got, tt.line)
		}
		back, err := ParseEvent(tt.line)
		if err != nil || back != tt.e {
			t.Errorf("ParseEvent(%q) = %+v, %v; want %+v", tt.line, back, err, tt.e)
		}
	}
}

func TestParseEventRejects(t *testing.T) {
	for _, line := range []string{
		"",
		"s,r,1,2,3,Sent,4",          // seven fields
		"s,r,1,2,3,Sent,4,5,6",      // nine
		"s,r,1,2,3,Lost,4,",         // unknown event
		"s,r,x,2,3,Sent,4,",         // message_id
		"s,r,1,2,3,Received,now,",   // unix_us
		"s,r,1,2,c,Received,4,",     // client_id
		"s,r,1,2,3,Sent,4,slow",     // lag_us
		EventsHeader,                // a header is no row
		"1,2,3,Received,1795238808", // the older format
	} {
		if e, err := ParseEvent(line); err == nil {
			t.Errorf("ParseEvent(%q) = %+v, want an error", line, e)
		}
	}
}

func TestParseKind(t *testing.T) {
	for _, k := range []Kind{Joined, Sent, Received} {
		if got, ok := ParseKind([]byte(k.String())); !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, ok)
		}
	}
	if _, ok := ParseKind([]byte("sent")); ok {
		t.Error("event names are case-sensitive")
	}
}

func TestReadEvents(t *testing.T) {
	dir := t.TempDir()
	body := EventsHeader + "\ns,r,,,1,Joined,10,\r\ns,r,1,1,1,Sent,20,3\ns,r,1,1,1,Received,25,\n"
	plain := filepath.Join(dir, "run.csv")
	os.WriteFile(plain, []byte(body), 0o644)
	gzPath := filepath.Join(dir, "run.csv.gz")
	f, _ := os.Create(gzPath)
	zw := gzip.NewWriter(f)
	zw.Write([]byte(body))
	zw.Close()
	f.Close()
	for _, p := range []string{plain, gzPath} {
		var kinds []string
		err := ReadEvents(p, func(e *Event) error { kinds = append(kinds, e.Kind.String()); return nil })
		if err != nil || strings.Join(kinds, " ") != "Joined Sent Received" {
			t.Errorf("%s: %v, %v", filepath.Base(p), kinds, err)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte(EventsHeader+"\ns,r,1,1,1,Sent,20,3\ns,r,1,x,1,Sent,20,3\n"), 0o644)
	err := ReadEvents(bad, func(*Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "bad.csv:3") {
		t.Errorf("malformed row: %v, want an error naming bad.csv:3", err)
	}
	noHead := filepath.Join(dir, "nohead.csv")
	os.WriteFile(noHead, []byte("1,a,b,Received,5\n"), 0o644)
	if err := ReadEvents(noHead, func(*Event) error { return nil }); err == nil {
		t.Error("a file without the header was read")
	}
}

func TestPaths(t *testing.T) {
	for _, tt := range []struct {
		out     string
		workers int
		meta    string
		parts   string
		server  string
	}{
		{"x.csv", 1, "x.meta.json", "x.csv", "x.server.csv"},
		{"d/x.csv.gz", 2, "d/x.meta.json", "d/x.w0.csv.gz d/x.w1.csv.gz", "d/x.server.csv"},
		{"x", 1, "x.meta.json", "x", "x.server.csv"},
	} {
		meta, parts := Paths(tt.out, tt.workers)
		if meta != tt.meta || strings.Join(parts, " ") != tt.parts || ServerMetricsPath(tt.out) != tt.server {
			t.Errorf("Paths(%q, %d) = %q %q, server %q", tt.out, tt.workers, meta, parts, ServerMetricsPath(tt.out))
		}
	}
}
