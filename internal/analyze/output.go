package analyze

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// WriteFiles writes summary.csv, summary.json and timeseries.csv into dir,
// creating it.
func (r *Result) WriteFiles(dir string) error {
	return results.WriteSummary(dir, &r.Summary, r.Series)
}

// WriteTable prints the human summary: one line per step, the warnings, and
// the hottest rooms of skewed steps.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tclients\trooms\tsent\texpected\treceived\tlost\tratio\torphans\tp50_ms\tp90_ms\tp99_ms\tp99.9_ms\tmax_ms\tmean_ms\tstddev_ms\t")
	row := func(s *results.StepStats) {
		mark := ""
		if s.Saturated {
			mark = " (!)"
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			s.Step, mark, s.Clients, s.Rooms, s.Sent, s.Expected, s.Received, s.Lost, s.DeliveryRatio, s.Orphans,
			lat(s, s.P50), lat(s, s.P90), lat(s, s.P99), lat(s, s.P999), lat(s, s.Max), lat(s, s.Mean), lat(s, s.Stddev))
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

// lat formats a latency of s, or "–" when s delivered nothing: no
// measurement, not 0 ms.
func lat(s *results.StepStats, v float64) string {
	if !s.Measured() {
		return "–"
	}
	return fms(v)
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
