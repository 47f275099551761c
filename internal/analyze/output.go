package analyze

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"
)

// Output file names in the --out folder.
const (
	SummaryCSV    = "summary.csv"
	SummaryJSON   = "summary.json"
	TimeseriesCSV = "timeseries.csv"
)

// SummaryHeader is the header of summary.csv.
var SummaryHeader = []string{
	"step", "clients", "rooms", "sent", "expected", "received", "lost", "delivery_ratio", "orphans", "duplicate_sent",
	"p10_ms", "p20_ms", "p30_ms", "p40_ms", "p50_ms", "p60_ms", "p70_ms", "p80_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms",
	"min_ms", "max_ms", "mean_ms", "stddev_ms", "negative_latencies", "start_unix_us", "end_unix_us", "duration_s",
	"room_skew", "saturated", "saturation_reason",
}

// TimeseriesHeader is the header of timeseries.csv.
var TimeseriesHeader = []string{"step", "unix_us", "t_s", "sent", "deliveries", "deliveries_per_s", "p50_ms", "p99_ms"}

func f64(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
func i64(v int64) string   { return strconv.FormatInt(v, 10) }

func (s *StepStats) csvRecord() []string {
	rec := []string{s.Step, i64(s.Clients), i64(s.Rooms), i64(s.Sent), i64(s.Expected), i64(s.Received), i64(s.Lost),
		strconv.FormatFloat(s.DeliveryRatio, 'f', 6, 64), i64(s.Orphans), i64(s.Duplicates)}
	for _, p := range s.Percentiles() {
		rec = append(rec, f64(p.Ms))
	}
	dur := 0.0
	if s.EndUnixUS > s.StartUnixUS {
		dur = float64(s.EndUnixUS-s.StartUnixUS) / 1e6
	}
	rec = append(rec, f64(s.Min), f64(s.Max), strconv.FormatFloat(s.Mean, 'f', 3, 64),
		strconv.FormatFloat(s.Stddev, 'f', 3, 64), i64(s.NegativeLatencies), i64(s.StartUnixUS), i64(s.EndUnixUS),
		f64(dur), strconv.FormatFloat(s.RoomSkew, 'f', 3, 64), strconv.FormatBool(s.Saturated), s.SaturationReason)
	return rec
}

// WriteFiles writes summary.csv, summary.json and timeseries.csv into dir,
// creating it.
func (r *Result) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, SummaryCSV), func(w *csv.Writer) error {
		if err := w.Write(SummaryHeader); err != nil {
			return err
		}
		for i := range r.Steps {
			if err := w.Write(r.Steps[i].csvRecord()); err != nil {
				return err
			}
		}
		return w.Write(r.Overall.csvRecord())
	}); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, TimeseriesCSV), func(w *csv.Writer) error {
		if err := w.Write(TimeseriesHeader); err != nil {
			return err
		}
		starts := make(map[string]int64)
		for _, s := range r.Steps {
			starts[s.Step] = s.StartUnixUS
		}
		for _, p := range r.Series {
			t := float64(p.UnixUS-starts[p.Step]) / 1e6
			if err := w.Write([]string{p.Step, i64(p.UnixUS), f64(t), i64(p.Sent), i64(p.Deliveries),
				f64(p.PerSecond), f64(p.P50Ms), f64(p.P99Ms)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, SummaryJSON), append(b, '\n'), 0o644)
}

func writeCSV(path string, fill func(*csv.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := fill(w); err != nil {
		f.Close()
		return err
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadSummary reads a summary.json written by WriteFiles.
func ReadSummary(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// ReadTimeseries reads a timeseries.csv written by WriteFiles.
func ReadTimeseries(path string) ([]SeriesPoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []SeriesPoint
	for i, rec := range recs {
		if i == 0 {
			continue
		}
		if len(rec) != len(TimeseriesHeader) {
			return nil, fmt.Errorf("%s:%d: want %d fields", path, i+1, len(TimeseriesHeader))
		}
		var p SeriesPoint
		var errs [6]error
		p.Step = rec[0]
		p.UnixUS, errs[0] = strconv.ParseInt(rec[1], 10, 64)
		p.Sent, errs[1] = strconv.ParseInt(rec[3], 10, 64)
		p.Deliveries, errs[2] = strconv.ParseInt(rec[4], 10, 64)
		p.PerSecond, errs[3] = strconv.ParseFloat(rec[5], 64)
		p.P50Ms, errs[4] = strconv.ParseFloat(rec[6], 64)
		p.P99Ms, errs[5] = strconv.ParseFloat(rec[7], 64)
		for _, e := range errs {
			if e != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, e)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// WriteTable prints the human summary: one line per step, the warnings, and
// the hottest rooms of skewed steps.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tclients\trooms\tsent\texpected\treceived\tlost\tratio\torphans\tp50_ms\tp90_ms\tp99_ms\tp99.9_ms\tmax_ms\tmean_ms\tstddev_ms\t")
	row := func(s *StepStats) {
		mark := ""
		if s.Saturated {
			mark = " (!)"
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			s.Step, mark, s.Clients, s.Rooms, s.Sent, s.Expected, s.Received, s.Lost, s.DeliveryRatio, s.Orphans,
			fms(s.P50), fms(s.P90), fms(s.P99), fms(s.P999), fms(s.Max), fms(s.Mean), fms(s.Stddev))
	}
	for i := range r.Steps {
		row(&r.Steps[i])
	}
	if len(r.Steps) > 1 {
		row(&r.Overall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Steps {
		if s.Saturated {
			reason := s.SaturationReason
			if reason == "" {
				reason = "see meta.json"
			}
			fmt.Fprintf(w, "WARNING: step %s: the load generator was saturated (%s); its latencies say more about the generator than the server.\n", s.Step, reason)
		}
		if s.NegativeLatencies > 0 {
			fmt.Fprintf(w, "WARNING: step %s: %d deliveries arrived before their due time (clocks?); counted as 0 ms.\n", s.Step, s.NegativeLatencies)
		}
	}
	for _, s := range r.Steps {
		if s.RoomSkew < 2 || len(s.HotRooms) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nstep %s: rooms are skewed (busiest room %.1f× the mean); hottest rooms:\n", s.Step, s.RoomSkew)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "room\tmembers\tsent\texpected\treceived\tlost\tmean_ms\tmax_ms\t")
		for _, h := range s.HotRooms[:min(5, len(s.HotRooms))] {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", h.Room, h.Members, h.Sent, h.Expected, h.Received, h.Lost, fms(h.MeanMs), fms(h.MaxMs))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.Malformed > 0 {
		fmt.Fprintf(w, "\n%d malformed rows skipped; the first:\n", r.Malformed)
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if r.Ignored > 0 {
		fmt.Fprintf(w, "\n%d rows ignored: not chat events (message_id 0 without a sender)\n", r.Ignored)
	}
	for _, t := range r.Truncated {
		fmt.Fprintf(w, "note: %s ends with a partial line (cut short?), skipped\n", t)
	}
	_, err := fmt.Fprintf(w, "\nread %s in %d rows in %s (%.0f MB/s)\n", byteSize(r.Bytes), r.Rows,
		r.Elapsed.Round(time.Millisecond), float64(r.Bytes)/1e6/max(r.Elapsed.Seconds(), 1e-9))
	return err
}

func fms(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func byteSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%d B", n)
}
