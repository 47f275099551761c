// The files of an analysis (`scalechat analyze --out DIR`): summary.csv and
// summary.json (the figures of every step and of the whole run) and
// timeseries.csv (deliveries and latency per interval). `scalechat report`
// and `scalechat bench analyze` read them back.

package results

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// File names of an analysis in its --out folder.
const (
	SummaryCSV    = "summary.csv"
	SummaryJSON   = "summary.json"
	TimeseriesCSV = "timeseries.csv"
)

// Summary is summary.json: what an analysis found.
type Summary struct {
	Inputs    []string `json:"inputs"`
	Bytes     int64    `json:"bytes"`
	Rows      int64    `json:"rows"`
	Malformed int64    `json:"malformed_rows"`
	// Ignored counts well-formed rows that are not chat events (docs/csv.md).
	Ignored   int64    `json:"ignored_rows"`
	Errors    []string `json:"malformed_examples,omitempty"`
	Truncated []string `json:"truncated_files,omitempty"`
	Window    string   `json:"window"`
	Interval  string   `json:"interval"`
	// Histogram says how percentiles were computed and how precise they are.
	Histogram string `json:"histogram"`
	// PeakInFlight is the most messages the join held at once (summed
	// over partitions): memory follows it, not the size of the files.
	PeakInFlight int64       `json:"peak_messages_in_flight"`
	Steps        []StepStats `json:"steps"`
	Overall      StepStats   `json:"overall"`
	Meta         *Meta       `json:"meta,omitempty"`
	// MetaPath and ServerMetrics are the files found beside the inputs.
	MetaPath      string `json:"meta_path,omitempty"`
	ServerMetrics string `json:"server_metrics,omitempty"`
}

// StepStats are the figures of one step, or of the whole run.
type StepStats struct {
	Step     string `json:"step"`
	Clients  int64  `json:"clients"`
	Rooms    int64  `json:"rooms"`
	Sent     int64  `json:"sent"`
	Expected int64  `json:"expected"`
	Received int64  `json:"received"`
	// Lost sums, over messages, the expected deliveries that did not
	// arrive (a message's surplus deliveries do not offset another's loss).
	Lost          int64   `json:"lost"`
	DeliveryRatio float64 `json:"delivery_ratio"`
	Orphans       int64   `json:"orphans"`
	Duplicates    int64   `json:"duplicate_sent"`
	Latency
	NegativeLatencies int64  `json:"negative_latencies"`
	StartUnixUS       int64  `json:"start_unix_us"`
	EndUnixUS         int64  `json:"end_unix_us"`
	Saturated         bool   `json:"saturated"`
	SaturationReason  string `json:"saturation_reason,omitempty"`
	// RoomSkew is the busiest room's expected deliveries over the mean
	// room's: 1 for evenly loaded rooms.
	RoomSkew float64     `json:"room_skew"`
	HotRooms []RoomStats `json:"hot_rooms,omitempty"`
}

// Measured reports whether the step's latencies mean anything: some
// message was delivered. Without, summary.csv leaves them empty,
// summary.json null, and the tables show "–".
func (s *StepStats) Measured() bool { return s.Received > 0 }

// stepJSON is StepStats without its MarshalJSON.
type stepJSON StepStats

// stepUnmeasured is a step with no delivery in summary.json: its latency
// fields are null (they shadow the embedded Latency's, one level deeper).
type stepUnmeasured struct {
	stepJSON
	P10    *float64 `json:"p10_ms"`
	P20    *float64 `json:"p20_ms"`
	P30    *float64 `json:"p30_ms"`
	P40    *float64 `json:"p40_ms"`
	P50    *float64 `json:"p50_ms"`
	P60    *float64 `json:"p60_ms"`
	P70    *float64 `json:"p70_ms"`
	P80    *float64 `json:"p80_ms"`
	P90    *float64 `json:"p90_ms"`
	P95    *float64 `json:"p95_ms"`
	P99    *float64 `json:"p99_ms"`
	P999   *float64 `json:"p99_9_ms"`
	Min    *float64 `json:"min_ms"`
	Max    *float64 `json:"max_ms"`
	Mean   *float64 `json:"mean_ms"`
	Stddev *float64 `json:"stddev_ms"`
}

// MarshalJSON writes the latencies of a step with no delivery as null, not
// 0: readers that decode them into numbers get 0 and must ask Measured.
func (s StepStats) MarshalJSON() ([]byte, error) {
	if s.Measured() {
		return json.Marshal(stepJSON(s))
	}
	return json.Marshal(stepUnmeasured{stepJSON: stepJSON(s)})
}

// Latency holds per-delivery latency figures in milliseconds.
type Latency struct {
	P10    float64 `json:"p10_ms"`
	P20    float64 `json:"p20_ms"`
	P30    float64 `json:"p30_ms"`
	P40    float64 `json:"p40_ms"`
	P50    float64 `json:"p50_ms"`
	P60    float64 `json:"p60_ms"`
	P70    float64 `json:"p70_ms"`
	P80    float64 `json:"p80_ms"`
	P90    float64 `json:"p90_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	P999   float64 `json:"p99_9_ms"`
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
	Mean   float64 `json:"mean_ms"`
	Stddev float64 `json:"stddev_ms"`
}

// Percentile is one named latency percentile.
type Percentile struct {
	Name     string  // "p50"
	Quantile float64 // 0.5
	Ms       float64
}

// Quantiles lists the reported percentiles in order.
var Quantiles = []float64{.1, .2, .3, .4, .5, .6, .7, .8, .9, .95, .99, .999}

var quantileNames = []string{"p10", "p20", "p30", "p40", "p50", "p60", "p70", "p80", "p90", "p95", "p99", "p99.9"}

// Percentiles returns the percentiles in increasing order.
func (l *Latency) Percentiles() []Percentile {
	v := l.fields()
	out := make([]Percentile, len(Quantiles))
	for i := range Quantiles {
		out[i] = Percentile{Name: quantileNames[i], Quantile: Quantiles[i], Ms: *v[i]}
	}
	return out
}

// SetPercentiles sets the percentiles of Quantiles, in their order.
func (l *Latency) SetPercentiles(ms []float64) {
	for i, p := range l.fields()[:min(len(ms), len(Quantiles))] {
		*p = ms[i]
	}
}

func (l *Latency) fields() []*float64 {
	return []*float64{&l.P10, &l.P20, &l.P30, &l.P40, &l.P50, &l.P60, &l.P70, &l.P80, &l.P90, &l.P95, &l.P99, &l.P999}
}

// RoomStats are the figures of one room in one step.
type RoomStats struct {
	Room     string  `json:"room"`
	Members  int64   `json:"members"`
	Sent     int64   `json:"sent"`
	Expected int64   `json:"expected"`
	Received int64   `json:"received"`
	Lost     int64   `json:"lost"`
	MeanMs   float64 `json:"mean_ms"`
	MaxMs    float64 `json:"max_ms"`
}

// SeriesPoint is one interval of one step: a row of timeseries.csv.
type SeriesPoint struct {
	Step       string
	UnixUS     int64 // interval start
	Sent       int64
	Deliveries int64
	PerSecond  float64 // deliveries per second
	P50Ms      float64
	P99Ms      float64
}

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
	// A step with no delivery leaves its latencies empty: not measured.
	lat := func(v string) string {
		if !s.Measured() {
			return ""
		}
		return v
	}
	for _, p := range s.Percentiles() {
		rec = append(rec, lat(f64(p.Ms)))
	}
	dur := 0.0
	if s.EndUnixUS > s.StartUnixUS {
		dur = float64(s.EndUnixUS-s.StartUnixUS) / 1e6
	}
	rec = append(rec, lat(f64(s.Min)), lat(f64(s.Max)), lat(strconv.FormatFloat(s.Mean, 'f', 3, 64)),
		lat(strconv.FormatFloat(s.Stddev, 'f', 3, 64)), i64(s.NegativeLatencies), i64(s.StartUnixUS), i64(s.EndUnixUS),
		f64(dur), strconv.FormatFloat(s.RoomSkew, 'f', 3, 64), strconv.FormatBool(s.Saturated), s.SaturationReason)
	return rec
}

// WriteSummary writes summary.csv, summary.json and timeseries.csv into
// dir, creating it.
func WriteSummary(dir string, s *Summary, series []SeriesPoint) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, SummaryCSV), func(w *csv.Writer) error {
		if err := w.Write(SummaryHeader); err != nil {
			return err
		}
		for i := range s.Steps {
			if err := w.Write(s.Steps[i].csvRecord()); err != nil {
				return err
			}
		}
		return w.Write(s.Overall.csvRecord())
	}); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, TimeseriesCSV), func(w *csv.Writer) error {
		return writeTimeseries(w, s.Steps, series)
	}); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, SummaryJSON), append(b, '\n'), 0o644)
}

// writeTimeseries writes the header and a row per point; t_s counts from
// the start of the point's step.
func writeTimeseries(w *csv.Writer, steps []StepStats, series []SeriesPoint) error {
	if err := w.Write(TimeseriesHeader); err != nil {
		return err
	}
	starts := make(map[string]int64)
	for _, s := range steps {
		starts[s.Step] = s.StartUnixUS
	}
	for _, p := range series {
		t := float64(p.UnixUS-starts[p.Step]) / 1e6
		if err := w.Write([]string{p.Step, i64(p.UnixUS), f64(t), i64(p.Sent), i64(p.Deliveries),
			f64(p.PerSecond), f64(p.P50Ms), f64(p.P99Ms)}); err != nil {
			return err
		}
	}
	return nil
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

// ReadSummary reads a summary.json written by WriteSummary.
func ReadSummary(path string) (*Summary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// ReadTimeseries reads a timeseries.csv written by WriteSummary.
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
