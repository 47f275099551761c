// The transport comparison (`scalechat bench transports`) runs WebSocket,
// HTTP long polling and plain HTTP polling under the same load: for a
// growing number of clients, each client sends one message and waits for it
// to come back within a timeout. Its results are comparison.csv rows and a
// comparison.json that says how it ran; `scalechat report` draws them.

package results

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Transports compared, in the order of the charts.
const (
	WebSocket   = "websocket"
	LongPolling = "long-polling"
	Polling     = "polling"
)

// TransportNames lists the transports in chart order.
var TransportNames = []string{WebSocket, LongPolling, Polling}

// File names inside a results folder.
const (
	ComparisonCSV  = "transports.csv"
	ComparisonJSON = "transports.json"
)

// ComparisonHeader is the header row of transports.csv.
const ComparisonHeader = "transport,clients,sent,received,errors,timeouts,connect_errors,request_errors," +
	"p50_ms,p90_ms,p99_ms,max_ms,server_cpu_seconds,bytes_in,bytes_out,saturated"

// ComparisonRow is one step of one transport: clients that each sent one message.
type ComparisonRow struct {
	Transport string `json:"transport"`
	Clients   int    `json:"clients"`
	Sent      int64  `json:"sent"`     // messages sent
	Received  int64  `json:"received"` // messages back at their sender within the timeout
	// Errors counts the clients whose message did not come back within
	// the timeout, for whatever reason: Timeouts (sent, not back in time),
	// clients that never joined or never sent.
	Errors        int64 `json:"errors"`
	Timeouts      int64 `json:"timeouts"`
	ConnectErrors int64 `json:"connect_errors"`
	RequestErrors int64 `json:"request_errors"` // failed HTTP requests (polling) or dropped connections (WebSocket)
	// Latency of the messages back in time, from the due instant, ms.
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
	ServerCPU float64 `json:"server_cpu_seconds"` // server process CPU time over the run
	BytesIn   int64   `json:"bytes_in"`           // bytes the server read: WebSocket + HTTP
	BytesOut  int64   `json:"bytes_out"`          // bytes the server wrote: WebSocket + HTTP
	Saturated bool    `json:"saturated"`          // the load generator was the bottleneck
}

// ComparisonMeta is transports.json: how the comparison ran.
type ComparisonMeta struct {
	Tool        string    `json:"tool"`
	Version     string    `json:"version"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at"`
	Args        []string  `json:"args"`
	Clients     []int     `json:"clients"`
	Transports  []string  `json:"transports"`
	Timeout     string    `json:"timeout"`
	PollWait    string    `json:"poll_wait"`
	PollEvery   string    `json:"poll_interval"`
	MsgSize     int       `json:"msg_size"`
	Pinning     string    `json:"pinning"`
	LoadBefore  string    `json:"loadavg_before"`
	LoadAfter   string    `json:"loadavg_after"`
	Machine     string    `json:"machine"`
	Interrupted bool      `json:"interrupted,omitempty"`
	Notes       []string  `json:"notes,omitempty"`
}

// WriteComparison writes rows with the header.
func WriteComparison(w io.Writer, rows []ComparisonRow) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(strings.Split(ComparisonHeader, ",")); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range rows {
		if err := cw.Write([]string{r.Transport, strconv.Itoa(r.Clients), i(r.Sent), i(r.Received), i(r.Errors), i(r.Timeouts),
			i(r.ConnectErrors), i(r.RequestErrors), f(r.P50), f(r.P90), f(r.P99), f(r.Max), f(r.ServerCPU),
			i(r.BytesIn), i(r.BytesOut), strconv.FormatBool(r.Saturated)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadComparison reads transports.csv. Malformed rows are skipped and counted;
// only an unreadable file or a wrong header is an error.
func ReadComparison(path string) (rows []ComparisonRow, malformed int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	if strings.Join(head, ",") != ComparisonHeader {
		return nil, 0, fmt.Errorf("%s: not a transports comparison (header %q)", path, strings.Join(head, ","))
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			malformed++
			continue
		}
		row, ok := parseComparisonRow(rec)
		if !ok {
			malformed++
			continue
		}
		rows = append(rows, row)
	}
	return rows, malformed, nil
}

func parseComparisonRow(rec []string) (ComparisonRow, bool) {
	if len(rec) != 16 || !slices.Contains(TransportNames, rec[0]) {
		return ComparisonRow{}, false
	}
	r := ComparisonRow{Transport: rec[0]}
	var errs []error
	n := func(s string) int64 {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			errs = append(errs, errors.New(s))
		}
		return v
	}
	fl := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 {
			errs = append(errs, errors.New(s))
		}
		return v
	}
	r.Clients = int(n(rec[1]))
	r.Sent, r.Received, r.Errors, r.Timeouts = n(rec[2]), n(rec[3]), n(rec[4]), n(rec[5])
	r.ConnectErrors, r.RequestErrors = n(rec[6]), n(rec[7])
	r.P50, r.P90, r.P99, r.Max, r.ServerCPU = fl(rec[8]), fl(rec[9]), fl(rec[10]), fl(rec[11]), fl(rec[12])
	r.BytesIn, r.BytesOut = n(rec[13]), n(rec[14])
	sat, err := strconv.ParseBool(rec[15])
	if err != nil {
		errs = append(errs, err)
	}
	r.Saturated = sat
	return r, len(errs) == 0
}

// ReadComparisonMeta reads transports.json.
func ReadComparisonMeta(path string) (*ComparisonMeta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m ComparisonMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}
