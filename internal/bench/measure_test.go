//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
	"github.com/scalechat/scalechat/internal/results"
)

// slowRooms is a fake HTTP chat transport that shows each posted message to
// polls only after a delay: 50 ms for messages of even client ids, slow for
// odd ones (the wire message_id is client_id<<32 | counter).
type slowRooms struct {
	slow time.Duration
	mu   sync.Mutex
	msgs map[string][]slowMsg
}

type slowMsg struct {
	frame   []byte
	visible time.Time
}

func (s *slowRooms) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(r.URL.Path, "/") // "", rooms, {room}, messages
	if len(parts) != 4 {
		http.NotFound(w, r)
		return
	}
	room := parts[2]
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID uint64 `json:"message_id"`
		}
		if json.Unmarshal(body, &m) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		delay := 50 * time.Millisecond
		if (m.ID>>32)%2 == 1 {
			delay = s.slow
		}
		s.mu.Lock()
		seq := len(s.msgs[room]) + 1
		frame := fmt.Appendf(nil, `{"seq":%d,%s`, seq, body[1:])
		s.msgs[room] = append(s.msgs[room], slowMsg{frame, time.Now().Add(delay)})
		s.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	since, _ := strconv.Atoi(r.URL.Query().Get("since"))
	for {
		s.mu.Lock()
		var out []string
		for i, m := range s.msgs[room] {
			if i+1 > since && time.Now().After(m.visible) {
				out = append(out, string(m.frame))
			}
		}
		s.mu.Unlock()
		if len(out) > 0 || r.URL.Query().Get("since") == "" {
			fmt.Fprintf(w, `{"room":%q,"seq":%d,"messages":[%s]}`, room, since+len(out), strings.Join(out, ","))
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestTimeoutIsAnError runs a long-polling load test against a server that
// brings every odd client's message back too late: those count as errors
// and timeouts, the others as received.
func TestTimeoutIsAnError(t *testing.T) {
	srv := httptest.NewServer(&slowRooms{slow: 1500 * time.Millisecond, msgs: map[string][]slowMsg{}})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := &loadtest.Config{URL: srv.URL, Transport: loadtest.TransportPoll, RoomPrefix: "tmo", Seed: 1, Loops: 1,
		ConnectTimeout: loadtest.Duration(5 * time.Second), Out: filepath.Join(dir, "run.csv"),
		Steps: []loadtest.Step{{Name: "s", Rooms: 10, RoomSize: 1, RoomsPerClient: 1, MsgFrequency: loadtest.Duration(time.Second),
			MsgSize: 16, Duration: loadtest.Duration(time.Second), Ramp: 1000, Drain: loadtest.Duration(3 * time.Second)}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := loadtest.Run(ctx, context.Background(), cfg, loadtest.Options{Stdout: io.Discard, Stderr: io.Discard, Machine: loadtest.InspectMachine()})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Meta.Steps[0]
	if st.Sent != 10 || st.Received != 10 {
		t.Fatalf("the load test itself lost messages: %+v", st)
	}
	row, err := Measure(results.LongPolling, cfg.Out, st, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Clients 1, 3, 5, 7, 9 get theirs back after 1.5 s, past the 1 s timeout.
	if row.Sent != 10 || row.Received != 5 || row.Timeouts != 5 || row.Errors != 5 {
		t.Fatalf("row %+v", row)
	}
	if row.Max > 1000 {
		t.Errorf("a message back after %.0f ms counted as in time", row.Max)
	}
}

// Four clients: 0 back after 2 ms, 1 back after 8 ms, 2 back too late
// (12 s), 3 never joined; 5 (another step's) message to 0 is not its own.
const roundTripEvents = `step,room,message_id,sender_id,client_id,event,unix_us,lag_us
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
	if err := os.WriteFile(p, []byte(roundTripEvents), 0o644); err != nil {
		t.Fatal(err)
	}
	st := results.StepMeta{Clients: 4, ConnectErrors: 1, SendErrors: 1, PollErrors: 2, Saturated: true}
	row, err := Measure(results.LongPolling, p, st, 11*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := results.ComparisonRow{Transport: results.LongPolling, Clients: 4, Sent: 3, Received: 2, Errors: 2, Timeouts: 1, ConnectErrors: 1, RequestErrors: 3,
		P50: 2, P90: 8, P99: 8, Max: 8, Saturated: true}
	if !reflect.DeepEqual(row, want) {
		t.Errorf("Measure:\n got %+v\nwant %+v", row, want)
	}
	os.WriteFile(p, []byte("h\ns,r0,x,0,0,Sent,1,\n"), 0o644)
	if _, err := Measure(results.WebSocket, p, st, time.Second); err == nil {
		t.Error("a malformed row was accepted")
	}
}
