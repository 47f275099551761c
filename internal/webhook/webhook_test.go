package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

func names(evs []Event) []string {
	var out []string
	for _, e := range evs {
		s := e.Name
		if e.Room != "" {
			s += " " + e.Room
		}
		if e.User != "" {
			s += " " + e.User
		}
		out = append(out, s)
	}
	return out
}

// drain returns what m queued, without the opening reset, and commits it.
func drain(t *testing.T, m *Memory) []string {
	t.Helper()
	var out []string
	for m.Stats().Queued > 0 {
		evs, err := m.Next(context.Background(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Commit(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		for _, s := range names(evs) {
			if s != Reset {
				out = append(out, s)
			}
		}
	}
	return out
}

type change struct {
	room, user string
	count      int
}

func TestMemoryTransitions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes []change
		want    []string
	}{
		{"first connection", []change{{"r", "ann", 1}},
			[]string{"user_online ann", "room_occupied r", "member_joined r ann"}},
		{"second connection of the same user is no event", []change{{"r", "ann", 1}, {"r", "ann", 2}},
			[]string{"user_online ann", "room_occupied r", "member_joined r ann"}},
		{"last connection leaves", []change{{"r", "ann", 2}, {"r", "ann", 0}},
			[]string{"user_online ann", "room_occupied r", "member_joined r ann", "member_left r ann", "room_vacated r", "user_offline ann"}},
		{"anonymous connections occupy, nothing else", []change{{"r", "", 1}, {"r", "", 0}},
			[]string{"room_occupied r", "room_vacated r"}},
		{"a user in two rooms is online once", []change{{"a", "bob", 1}, {"b", "bob", 1}, {"a", "bob", 0}, {"b", "bob", 0}},
			[]string{"user_online bob", "room_occupied a", "member_joined a bob", "room_occupied b", "member_joined b bob",
				"member_left a bob", "room_vacated a", "member_left b bob", "room_vacated b", "user_offline bob"}},
		{"a room stays occupied while another user is in it", []change{{"r", "ann", 1}, {"r", "bob", 1}, {"r", "ann", 0}},
			[]string{"user_online ann", "room_occupied r", "member_joined r ann", "user_online bob", "member_joined r bob",
				"member_left r ann", "user_offline ann"}},
		{"an unchanged count is no event", []change{{"r", "ann", 0}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory("e", 100, 0, nil)
			for _, c := range tc.changes {
				m.Presence(c.room, c.user, c.count)
			}
			if got := drain(t, m); !slices.Equal(got, tc.want) {
				t.Errorf("events\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestMemoryDropsWhenFullAndCounts(t *testing.T) {
	m := NewMemory("e", 3, 0, nil) // the reset takes one place
	m.Presence("r", "ann", 1)      // online and occupied fit, joined does not
	if st := m.Stats(); st.Queued != 3 || st.Dropped != 1 {
		t.Fatalf("queued %d dropped %d, want 3 and 1", st.Queued, st.Dropped)
	}
}

func TestSignature(t *testing.T) {
	body := []byte(`{"events":[]}`)
	sig := Sign([]byte("s3cret"), body, 1795000000)
	// Pinned against an independent computation:
	// printf '%s' '1795000000.{"events":[]}' | openssl dgst -sha256 -hmac s3cret
	if sig != "sha256=b34be80bbaf4e603d48cd99f6ed18846b88f762504c8ab67ee5d918d715a3f8f" {
		t.Fatalf("signature %q", sig)
	}
	at := time.Unix(1795000000, 0)
	for _, tc := range []struct {
		name, secret, body, ts, sig string
		now                         time.Time
		want                        error
	}{
		{"good", "s3cret", string(body), "1795000000", sig, at, nil},
		{"clocks 4 min apart", "s3cret", string(body), "1795000000", sig, at.Add(-4 * time.Minute), nil},
		{"another secret", "other", string(body), "1795000000", sig, at, ErrBadSignature},
		{"another body", "s3cret", `{"events":[ ]}`, "1795000000", sig, at, ErrBadSignature},
		{"upper case", "s3cret", string(body), "1795000000", strings.ToUpper(sig), at, ErrBadSignature},
		{"another timestamp", "s3cret", string(body), "1795000300", sig, at.Add(300 * time.Second), ErrBadSignature},
		{"no timestamp", "s3cret", string(body), "", sig, at, ErrBadSignature},
		{"replayed 6 min later", "s3cret", string(body), "1795000000", sig, at.Add(6 * time.Minute), ErrStale},
		{"from 6 min ahead", "s3cret", string(body), "1795000000", sig, at.Add(-6 * time.Minute), ErrStale},
	} {
		if err := Verify([]byte(tc.secret), []byte(tc.body), tc.ts, tc.sig, tc.now, DefaultTolerance); err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestReceiverRefusesAReplay: a request a dispatcher sent, captured and
// sent again, is a duplicate within the tolerance (its events not applied
// twice) and refused as stale after it; its timestamp changed to now, its
// signature no longer matches.
func TestReceiverRefusesAReplay(t *testing.T) {
	rcv := NewReceiver([]byte("k"))
	var captured atomic.Pointer[http.Request]
	var body atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		body.Store(&b)
		captured.Store(r.Clone(context.Background()))
		r.Body = io.NopCloser(bytes.NewReader(b))
		rcv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	m := NewMemory("e", 10, 0, nil)
	d := NewDispatcher(m, DispatcherConfig{URL: srv.URL, Secret: []byte("k")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	<-rcv.Changed()
	cancel()
	<-done
	replay := func(after time.Duration, ts string) int {
		rcv.mu.Lock()
		rcv.now = func() time.Time { return time.Now().Add(after) }
		rcv.mu.Unlock()
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(*body.Load()))
		r.Header = captured.Load().Header.Clone()
		if ts != "" {
			r.Header.Set(TimestampHeader, ts)
		}
		w := httptest.NewRecorder()
		rcv.ServeHTTP(w, r)
		return w.Code
	}
	if code := replay(60*time.Second, ""); code != http.StatusNoContent {
		t.Errorf("replayed after 60 s: %d, want 204 (a duplicate)", code)
	}
	if code := replay(6*time.Minute, ""); code != http.StatusUnauthorized {
		t.Errorf("replayed after 6 min: %d, want 401", code)
	}
	if code := replay(6*time.Minute, strconv.FormatInt(time.Now().Add(6*time.Minute).Unix(), 10)); code != http.StatusUnauthorized {
		t.Errorf("replayed after 6 min with a new timestamp: %d, want 401", code)
	}
	if st := rcv.Stats(); st.Events != 1 || st.Duplicates != 1 || st.Stale != 1 || st.BadSignatures != 1 {
		t.Errorf("receiver %+v: want 1 event, 1 duplicate, 1 stale, 1 bad signature", st)
	}
}

// TestDispatcherRetriesInOrder runs a dispatcher against a real HTTP
// receiver that fails its first requests: every event arrives, once after
// deduplication, in order, signed.
func TestDispatcherRetriesInOrder(t *testing.T) {
	rcv := NewReceiver([]byte("k"))
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1, 2:
			http.Error(w, "down", http.StatusServiceUnavailable)
		case 3: // taken, but the answer lost: sent again, deduplicated
			rcv.ServeHTTP(httptest.NewRecorder(), r)
			http.Error(w, "lost", http.StatusBadGateway)
		default:
			rcv.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	m := NewMemory("e", 1000, 0, nil)
	d := NewDispatcher(m, DispatcherConfig{URL: srv.URL, Secret: []byte("k"), Batch: 2, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	m.Presence("r", "ann", 1) // queued before the dispatcher starts: its first batch is the reset and online
	m.Presence("r", "ann", 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for st := d.Stats(); st.Sent < 7 || st.Queued > 0; st = d.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("sent %+v, receiver %+v", st, rcv.Stats())
		}
		time.Sleep(5 * time.Millisecond) // the dispatcher's counters signal nothing
	}
	want := []string{"reset", "user_online ann", "room_occupied r", "member_joined r ann", "member_left r ann", "room_vacated r", "user_offline ann"}
	if got := names(rcv.Events()); !slices.Equal(got, want) {
		t.Errorf("received\n got %q\nwant %q", got, want)
	}
	st, rs := d.Stats(), rcv.Stats()
	if st.Failed != 3 || st.Retried != 3 || rs.Duplicates != 2 || len(rs.Violations) != 0 || rs.BadSignatures != 0 {
		t.Errorf("dispatcher %+v receiver %+v: want 3 failed, 3 retried, 2 duplicates, no violation", st, rs)
	}
}

func TestReceiverRefusesABadSignature(t *testing.T) {
	rcv := NewReceiver([]byte("k"))
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	m := NewMemory("e", 10, 0, nil)
	d := NewDispatcher(m, DispatcherConfig{URL: srv.URL, Secret: []byte("wrong"), MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	deadline := time.After(10 * time.Second)
	for rcv.Stats().BadSignatures < 2 {
		select {
		case <-rcv.Changed():
		case <-deadline:
			t.Fatalf("receiver %+v", rcv.Stats())
		}
	}
	cancel()
	<-done
	if st := d.Stats(); st.Sent != 0 || st.Failed < 1 || st.Queued != 1 {
		t.Errorf("stats %+v: want nothing sent, the reset still queued", st)
	}
}

func TestReceiverRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []Event
		broken int
	}{
		{"in turn", []Event{{Name: Reset, Epoch: "a"}, {Name: RoomOccupied, Room: "r", Epoch: "a"}, {Name: RoomVacated, Room: "r", Epoch: "a"}}, 0},
		{"vacated twice", []Event{{Name: Reset, Epoch: "a"}, {Name: RoomOccupied, Room: "r", Epoch: "a"}, {Name: RoomVacated, Room: "r", Epoch: "a"}, {Name: RoomVacated, Room: "r", Epoch: "a"}}, 1},
		{"offline first", []Event{{Name: Reset, Epoch: "a"}, {Name: UserOffline, User: "u", Epoch: "a"}}, 1},
		{"a reset forgets", []Event{{Name: Reset, Epoch: "a"}, {Name: UserOnline, User: "u", Epoch: "a"}, {Name: Reset, Epoch: "b"}, {Name: UserOnline, User: "u", Epoch: "b"}}, 0},
		{"joined a room not occupied", []Event{{Name: Reset, Epoch: "a"}, {Name: UserOnline, User: "u", Epoch: "a"}, {Name: MemberJoined, Room: "r", User: "u", Epoch: "a"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReceiver(nil)
			r.mu.Lock()
			for _, e := range tc.events {
				r.applyLocked(e)
			}
			r.mu.Unlock()
			if got := len(r.Stats().Violations); got != tc.broken {
				t.Errorf("violations %q, want %d", r.Stats().Violations, tc.broken)
			}
		})
	}
}

// TestMemoryQueueKeepsOrderAcrossCommits sends a backlog in small batches:
// every event once, in the order queued, whatever the compaction.
func TestMemoryQueueKeepsOrderAcrossCommits(t *testing.T) {
	m := NewMemory("e", 10000, 0, nil)
	seen := 0
	for i := range 500 {
		m.Presence("r", "u", 1-i%2) // 1, 0, 1...: three events each change
		if i%50 == 0 {
			evs, _ := m.Next(context.Background(), 7)
			seen += len(evs)
			if err := m.Commit(context.Background(), evs); err != nil {
				t.Fatal(err)
			}
		}
	}
	for m.Stats().Queued > 0 {
		evs, _ := m.Next(context.Background(), 7)
		for _, e := range evs {
			seen++
			if want := "e-" + strconv.Itoa(seen); e.ID != want {
				t.Fatalf("event %s, want %s", e.ID, want)
			}
		}
		if err := m.Commit(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
	}
	if seen != 1+3*500 {
		t.Errorf("%d events, want %d", seen, 1+3*500)
	}
}

// TestDispatcherSendFilters: events Send leaves out are committed unsent
// and counted as filtered, not dropped, a batch of them alone without a
// request; the others arrive in order.
func TestDispatcherSendFilters(t *testing.T) {
	rcv := NewReceiver([]byte("k"))
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		rcv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	m := NewMemory("e", 1000, 0, nil)
	hidden := func(e Event) bool { return e.Room != "hidden" }
	d := NewDispatcher(m, DispatcherConfig{URL: srv.URL, Secret: []byte("k"), Batch: 2, Send: hidden})
	// Batches of two: [reset, online ann], [occupied, joined] and [left,
	// vacated] of hidden, [offline ann, online bob], [occupied, joined] of r.
	m.Presence("hidden", "ann", 1)
	m.Presence("hidden", "ann", 0)
	m.Presence("r", "bob", 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for {
		changed := rcv.Changed()
		if len(rcv.Events()) >= 6 { // the filtered ones came before the last
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("stats %+v, receiver holds %d events", d.Stats(), len(rcv.Events()))
		}
	}
	var got []string
	for _, e := range rcv.Events() {
		got = append(got, strings.TrimSpace(e.Name+" "+e.Room+" "+e.User))
	}
	want := []string{"reset", "user_online  ann", "user_offline  ann", "user_online  bob", "room_occupied r", "member_joined r bob"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("received %q\nwant     %q", got, want)
	}
	if st := d.Stats(); st.Filtered != 4 || st.Dropped != 0 {
		t.Errorf("stats %+v: want 4 filtered, none dropped", st)
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3: a batch filtered whole costs none", n)
	}
}

// TestDispatcherFollowsNoRedirect: a backend that answers a redirect has
// not taken the events. Followed, a 301 or 302 would turn the POST into a
// bodiless GET whose 2xx marks them sent, lost in silence; a 307 would send
// them and their signature elsewhere. The request fails (its Location
// logged), nothing is committed, the target is never asked.
func TestDispatcherFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/moved", status)
			}))
			defer srv.Close()
			var logged testsupport.SyncBuffer
			log := slog.New(slog.NewTextHandler(&logged, nil))
			m := NewMemory("e", 10, 0, nil)
			d := NewDispatcher(m, DispatcherConfig{URL: srv.URL, Secret: []byte("k"), MinBackoff: time.Hour, Logger: log})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); d.Run(ctx) }()
			deadline := time.Now().Add(10 * time.Second)
			for st := d.Stats(); st.Failed == 0 && st.Sent == 0 && time.Now().Before(deadline); st = d.Stats() {
				time.Sleep(5 * time.Millisecond) // the dispatcher's counters signal nothing
			}
			cancel()
			<-done
			if st := d.Stats(); st.Failed != 1 || st.Sent != 0 || st.Queued != 1 {
				t.Errorf("stats %+v: want 1 failed, nothing sent, the reset still queued", st)
			}
			if !strings.Contains(logged.String(), target.URL+"/moved") {
				t.Errorf("log %q does not name the Location", logged.String())
			}
		})
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect's target was reached %d times", n)
	}
}

// TestDispatcherTakesNoProxyFromTheEnvironment: like the hooks' client,
// the dispatcher's reaches the operator's backend directly. (Loopback
// never goes through a proxy, so this is checked on the transport.)
func TestDispatcherTakesNoProxyFromTheEnvironment(t *testing.T) {
	d := NewDispatcher(NewMemory("e", 1, 0, nil), DispatcherConfig{URL: "http://127.0.0.1:1"})
	tr, ok := d.cfg.Client.Transport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Errorf("transport %T with a proxy function: want an *http.Transport without one", d.cfg.Client.Transport)
	}
}

// TestDispatcherSlowReceiverMakesProgress: a backend that needs 10 ms an
// event, against a 200 ms timeout, never takes a batch of 61: the
// dispatcher halves the batch after each timeout until one fits, and every
// event arrives, once, in order.
func TestDispatcherSlowReceiverMakesProgress(t *testing.T) {
	rcv := NewReceiver([]byte("k"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		n := strings.Count(string(b), `"id":`)
		select {
		case <-r.Context().Done(): // the dispatcher gave up: nothing taken
			return
		case <-time.After(time.Duration(n) * 10 * time.Millisecond): // the backend's work, per event
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		rcv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	m := NewMemory("e", 1000, 0, nil)
	for i := range 60 {
		m.Published("r", uint64(i+1), []byte(`{"text":"hi"}`))
	}
	d := NewDispatcher(m, DispatcherConfig{URL: srv.URL, Secret: []byte("k"), Timeout: 200 * time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for rcv.Stats().Events < 61 && time.Now().Before(deadline) {
		select {
		case <-rcv.Changed():
		case <-time.After(time.Until(deadline)):
		}
	}
	evs := rcv.Events()
	if len(evs) != 61 {
		t.Fatalf("received %d events of 61, dispatcher %+v", len(evs), d.Stats())
	}
	for i, e := range evs[1:] {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i+1, e.Seq)
		}
	}
	if st := d.Stats(); st.Failed == 0 {
		t.Errorf("dispatcher %+v: want some requests timed out first", st)
	}
}

// TestAGapIsSeen: events dropped from a full queue leave a gap the
// receiver sees: the next event queued follows a dropped event counting
// them. Without it the receiver went on believing ann online and r
// occupied, then saw them online and occupied twice in a row.
func TestAGapIsSeen(t *testing.T) {
	rcv := NewReceiver([]byte("k"))
	m := NewMemory("e", 5, 0, nil)
	take := func() { // what the dispatcher would send now
		t.Helper()
		evs, err := m.Next(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(Body{Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		ts := time.Now().Unix()
		r.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
		r.Header.Set(SignatureHeader, Sign([]byte("k"), body, ts))
		rcv.ServeHTTP(httptest.NewRecorder(), r)
		if err := m.Commit(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
	}
	m.Presence("r", "ann", 1) // reset, online, occupied, joined
	m.Presence("r", "ann", 0) // left fits; vacated and offline are dropped
	take()
	m.Presence("r", "ann", 1)
	take()
	got := names(rcv.Events())
	want := []string{"reset", "user_online ann", "room_occupied r", "member_joined r ann", "member_left r ann",
		"dropped", "user_online ann", "room_occupied r", "member_joined r ann"}
	if !slices.Equal(got, want) {
		t.Errorf("received\n got %q\nwant %q", got, want)
	}
	if evs := rcv.Events(); len(evs) > 5 && evs[5].Count != 2 {
		t.Errorf("the dropped event counts %d, want 2", evs[5].Count)
	}
	if st := rcv.Stats(); st.Gaps != 1 || len(st.Violations) != 0 {
		t.Errorf("receiver %+v: want one gap, no rule broken", st)
	}
	if st := m.Stats(); st.Dropped != 2 {
		t.Errorf("memory %+v: want 2 dropped", st)
	}
}

// TestMemoryQueueBoundedInBytes: the queue is bounded in bytes as well as
// in events: twenty 16 KiB messages against 100 KiB queue six of them
// (beside the reset), the rest dropped and counted; once sent, there is
// room again, after a dropped event.
func TestMemoryQueueBoundedInBytes(t *testing.T) {
	m := NewMemory("e", 1000, 100<<10, nil)
	msg := []byte(`{"text":"` + strings.Repeat("x", 16<<10) + `"}`)
	for i := range 20 {
		m.Published("r", uint64(i+1), msg)
	}
	st := m.Stats()
	if st.Queued != 7 || st.Dropped != 14 || st.QueuedBytes > 100<<10 {
		t.Fatalf("stats %+v: want 7 queued (the reset and 6 messages) in at most 100 KiB, 14 dropped", st)
	}
	drain(t, m)
	if st := m.Stats(); st.QueuedBytes != 0 {
		t.Fatalf("%d bytes queued once all is sent", st.QueuedBytes)
	}
	m.Published("r", 21, msg)
	evs, err := m.Next(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(evs); !slices.Equal(got, []string{"dropped", "message_published r"}) || evs[0].Count != 14 {
		t.Errorf("after the drops: %q (count %d), want a dropped event counting 14, then the message", got, evs[0].Count)
	}
}
