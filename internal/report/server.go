package report

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
)

// ServerRow is one scrape of one server.
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

// ReadServerCSV reads a server metrics file. Malformed rows are skipped and
// counted; only an unreadable file or a wrong header is an error.
func ReadServerCSV(path string) (rows []ServerRow, malformed int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	if strings.Join(head, ",") != results.ServerHeader {
		return nil, 0, fmt.Errorf("%s: unexpected header (want %s)", path, results.ServerHeader)
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				malformed++
				continue
			}
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		if len(rec) != 9 {
			malformed++
			continue
		}
		var row ServerRow
		var errs [9]error
		row.UnixUS, errs[0] = strconv.ParseInt(rec[0], 10, 64)
		row.Node = rec[1]
		for i, p := range []*float64{&row.CPUSeconds, &row.RSSBytes, &row.Connections, &row.MessagesIn,
			&row.Deliveries, &row.ProcessingP50, &row.ProcessingP99} {
			*p, errs[i+1] = strconv.ParseFloat(rec[i+2], 64)
		}
		if errors.Join(errs[:]...) != nil {
			malformed++
			continue
		}
		rows = append(rows, row)
	}
	return rows, malformed, nil
}
