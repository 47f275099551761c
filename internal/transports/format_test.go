package transports

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
)

func TestCSVRoundTrip(t *testing.T) {
	rows := []Row{
		{Transport: WebSocket, Clients: 100, Sent: 100, Received: 100, P50: 1.5, P90: 2, P99: 3.25, Max: 4, ServerCPU: 0.12, BytesIn: 1000, BytesOut: 2000},
		{Transport: Polling, Clients: 200, Sent: 190, Received: 150, Errors: 50, Timeouts: 40, ConnectErrors: 10, RequestErrors: 7, Saturated: true},
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), Header+"\n") {
		t.Fatalf("header: %q", b.String())
	}
	b.WriteString("polling,1,2\nsmoke-signals,1,1,1,0,0,0,0,1,1,1,1,1,1,1,false\nwebsocket,-1,1,1,0,0,0,0,1,1,1,1,1,1,1,false\n")
	p := filepath.Join(t.TempDir(), ResultsCSV)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, bad, err := ReadCSV(p)
	if err != nil || bad != 3 || !reflect.DeepEqual(got, rows) {
		t.Errorf("ReadCSV: %+v, %d malformed, %v", got, bad, err)
	}
	os.WriteFile(p, []byte("a,b\n"), 0o644)
	if _, _, err := ReadCSV(p); err == nil {
		t.Error("a wrong header was accepted")
	}
}

// Four clients: 0 back after 2 ms, 1 back after 8 ms, 2 back too late
// (12 s), 3 never joined; 5 (another step's) message to 0 is not its own.
const events = `step,room,message_id,sender_id,client_id,event,unix_us,lag_us
s,r0,,,0,Joined,100,
s,r0,1,0,0,Sent,1000,5
s,r1,1,1,1,Sent,2000,5
s,r2,1,2,2,Sent,3000,5
s,r0,1,0,0,Received,3000,
s,r1,1,1,1,Received,10000,
s,r1,1,1,1,Received,20000,
s,r2,1,2,2,Received,12003000,
s,r0,1,5,0,Received,3500,
`

func TestMeasure(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e.csv")
	if err := os.WriteFile(p, []byte(events), 0o644); err != nil {
		t.Fatal(err)
	}
	st := loadtest.StepMeta{Clients: 4, ConnectErrors: 1, SendErrors: 1, PollErrors: 2, Saturated: true}
	row, err := Measure(LongPolling, p, st, 11*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Transport: LongPolling, Clients: 4, Sent: 3, Received: 2, Errors: 2, Timeouts: 1, ConnectErrors: 1, RequestErrors: 3,
		P50: 2, P90: 8, P99: 8, Max: 8, Saturated: true}
	if !reflect.DeepEqual(row, want) {
		t.Errorf("Measure:\n got %+v\nwant %+v", row, want)
	}
	os.WriteFile(p, []byte("h\ns,r0,x,0,0,Sent,1,\n"), 0o644)
	if _, err := Measure(WebSocket, p, st, time.Second); err == nil {
		t.Error("a malformed row was accepted")
	}
}
