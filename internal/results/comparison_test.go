package results

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCSVRoundTrip(t *testing.T) {
	rows := []ComparisonRow{
		{Transport: WebSocket, Clients: 100, Sent: 100, Received: 100, P50: 1.5, P90: 2, P99: 3.25, Max: 4, ServerCPU: 0.12, BytesIn: 1000, BytesOut: 2000},
		{Transport: Polling, Clients: 200, Sent: 190, Received: 150, Errors: 50, Timeouts: 40, ConnectErrors: 10, RequestErrors: 7, Saturated: true},
	}
	var b bytes.Buffer
	if err := WriteComparison(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), ComparisonHeader+"\n") {
		t.Fatalf("header: %q", b.String())
	}
	b.WriteString("polling,1,2\nsmoke-signals,1,1,1,0,0,0,0,1,1,1,1,1,1,1,false\nwebsocket,-1,1,1,0,0,0,0,1,1,1,1,1,1,1,false\n")
	p := filepath.Join(t.TempDir(), ComparisonCSV)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, bad, err := ReadComparison(p)
	if err != nil || bad != 3 || !reflect.DeepEqual(got, rows) {
		t.Errorf("ReadComparison: %+v, %d malformed, %v", got, bad, err)
	}
	os.WriteFile(p, []byte("a,b\n"), 0o644)
	if _, _, err := ReadComparison(p); err == nil {
		t.Error("a wrong header was accepted")
	}
}
