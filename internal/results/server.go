package results

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// ServerHeader is the header row of a run's <out>.server.csv: the server's
// counters, scraped from its /metrics once a second during a load test.
const ServerHeader = "unix_us,node,cpu_seconds,rss_bytes,connections,messages_in,deliveries,processing_p50_ms,processing_p99_ms"

// ServerRow is one scrape of one server: a row of <out>.server.csv. A figure
// the scrape lacked (the writer leaves its field empty, as it does for the
// processing percentiles of a node's first scrape) is NaN.
type ServerRow struct {
	UnixUS        int64
	Node          string
	CPUSeconds    float64
	RSSBytes      float64
	Connections   float64
	MessagesIn    float64
	Deliveries    float64
	ProcessingP50 float64
	ProcessingP99 float64
}

// serverFields is the number of columns of ServerHeader.
var serverFields = strings.Count(ServerHeader, ",") + 1

// ReadServer reads a server metrics file. Malformed rows are skipped and
// counted; only an unreadable file or a wrong header is an error.
func ReadServer(path string) (rows []ServerRow, malformed int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	rows, malformed, err = readServer(f)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return rows, malformed, nil
}

func readServer(in io.Reader) (rows []ServerRow, malformed int, err error) {
	r := csv.NewReader(in)
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		return nil, 0, err
	}
	if strings.Join(head, ",") != ServerHeader {
		return nil, 0, fmt.Errorf("not a server metrics file (want the header %s)", ServerHeader)
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, malformed, nil
		}
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe):
			malformed++
			continue
		case err != nil:
			return nil, 0, err
		}
		row, ok := parseServerRow(rec)
		if !ok {
			malformed++
			continue
		}
		rows = append(rows, row)
	}
}

// parseServerRow parses one record; an empty figure is NaN, text that is
// not a number makes the row malformed.
func parseServerRow(rec []string) (ServerRow, bool) {
	if len(rec) != serverFields {
		return ServerRow{}, false
	}
	row := ServerRow{Node: rec[1]}
	var err error
	if row.UnixUS, err = strconv.ParseInt(rec[0], 10, 64); err != nil {
		return ServerRow{}, false
	}
	for i, p := range []*float64{&row.CPUSeconds, &row.RSSBytes, &row.Connections, &row.MessagesIn,
		&row.Deliveries, &row.ProcessingP50, &row.ProcessingP99} {
		if rec[i+2] == "" {
			*p = math.NaN()
			continue
		}
		if *p, err = strconv.ParseFloat(rec[i+2], 64); err != nil {
			return ServerRow{}, false
		}
	}
	return row, true
}
