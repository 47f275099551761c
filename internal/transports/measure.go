package transports

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/loadtest"
)

// roundTrips reads a load test's events file and returns, for every message
// sent, how long it took to come back to its sender (-1: it never did).
func roundTrips(path string) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	type key struct{ sender, id uint64 }
	due := map[key]int64{}
	back := map[key]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			continue // header
		}
		// step,room,message_id,sender_id,client_id,event,unix_us,lag_us
		f := strings.Split(sc.Text(), ",")
		if len(f) != 8 || (f[5] != "Sent" && f[5] != "Received") {
			continue
		}
		id, err1 := strconv.ParseUint(f[2], 10, 64)
		sender, err2 := strconv.ParseUint(f[3], 10, 64)
		client, err3 := strconv.ParseUint(f[4], 10, 64)
		at, err4 := strconv.ParseInt(f[6], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return nil, fmt.Errorf("%s:%d: malformed row", path, line)
		}
		k := key{sender, id}
		switch {
		case f[5] == "Sent":
			due[k] = at
		case client == sender:
			if _, seen := back[k]; !seen {
				back[k] = at
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]time.Duration, 0, len(due))
	for k, d := range due {
		rt := time.Duration(-1)
		if b, ok := back[k]; ok {
			rt = time.Duration(max(b-d, 0)) * time.Microsecond
		}
		out = append(out, rt)
	}
	return out, nil
}

// Measure fills the row of one run from its events file and its step in
// meta.json: a message counts as received when it came back to its sender
// within timeout; every client whose message did not is an error.
func Measure(transport, events string, s loadtest.StepMeta, timeout time.Duration) (Row, error) {
	rts, err := roundTrips(events)
	if err != nil {
		return Row{}, err
	}
	row := Row{Transport: transport, Clients: s.Clients, Sent: int64(len(rts)), ConnectErrors: s.ConnectErrors,
		RequestErrors: s.SendErrors + s.PollErrors + s.Disconnects, Saturated: s.Saturated}
	var ok []time.Duration
	for _, rt := range rts {
		if rt >= 0 && rt <= timeout {
			ok = append(ok, rt)
		}
	}
	row.Received = int64(len(ok))
	row.Timeouts = row.Sent - row.Received
	row.Errors = max(int64(s.Clients)-row.Received, 0)
	slices.Sort(ok)
	row.P50, row.P90, row.P99 = percentileMs(ok, 50), percentileMs(ok, 90), percentileMs(ok, 99)
	if len(ok) > 0 {
		row.Max = ms(ok[len(ok)-1])
	}
	return row, nil
}

// percentileMs is the nearest-rank percentile of sorted durations, in ms.
func percentileMs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return ms(sorted[max(rank, 1)-1])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
