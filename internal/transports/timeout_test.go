package transports

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
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
	row, err := Measure(LongPolling, cfg.Out, st, time.Second)
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
