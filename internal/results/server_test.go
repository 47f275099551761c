package results

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadServer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		rows      int
		malformed int
		wantErr   bool
		check     func(t *testing.T, rows []ServerRow)
	}{
		{name: "full row", body: "1,n,1,2,3,4,5,6,7\n", rows: 1, check: func(t *testing.T, rows []ServerRow) {
			want := ServerRow{UnixUS: 1, Node: "n", CPUSeconds: 1, RSSBytes: 2, Connections: 3, MessagesIn: 4, Deliveries: 5, ProcessingP50: 6, ProcessingP99: 7}
			if rows[0] != want {
				t.Errorf("row %+v, want %+v", rows[0], want)
			}
		}},
		{name: "first scrape without percentiles", body: "1,n,1,2,3,4,5,,\n", rows: 1, check: func(t *testing.T, rows []ServerRow) {
			if !math.IsNaN(rows[0].ProcessingP50) || !math.IsNaN(rows[0].ProcessingP99) || rows[0].Deliveries != 5 {
				t.Errorf("row %+v: want NaN percentiles and 5 deliveries", rows[0])
			}
		}},
		{name: "quoted node", body: "1,\"a,b\",1,2,3,4,5,6,7\n", rows: 1, check: func(t *testing.T, rows []ServerRow) {
			if rows[0].Node != "a,b" {
				t.Errorf("node %q", rows[0].Node)
			}
		}},
		{name: "text in a figure", body: "1,n,x,2,3,4,5,6,7\n1,n,1,2,3,4,5,6,7\n", rows: 1, malformed: 1},
		{name: "bad time", body: "t,n,1,2,3,4,5,6,7\n", malformed: 1},
		{name: "short row", body: "1,n\n1,n,1,2,3,4,5,6,7\n", rows: 1, malformed: 1},
		{name: "broken quote", body: "1,\"n,1,2,3,4,5,6,7\n", malformed: 1},
		{name: "wrong header", body: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := ServerHeader + "\n"
			if tc.wantErr {
				head = "a,b\n"
			}
			p := filepath.Join(t.TempDir(), "server.csv")
			if err := os.WriteFile(p, []byte(head+tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			rows, bad, err := ReadServer(p)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), p) {
					t.Fatalf("err %v, want one naming %s", err, p)
				}
				return
			}
			if err != nil || len(rows) != tc.rows || bad != tc.malformed {
				t.Fatalf("rows %d malformed %d err %v, want %d and %d", len(rows), bad, err, tc.rows, tc.malformed)
			}
			if tc.check != nil {
				tc.check(t, rows)
			}
		})
	}
	if _, _, err := ReadServer(filepath.Join(t.TempDir(), "none.csv")); err == nil {
		t.Error("missing file: no error")
	}
}
