//go:build linux

package bench

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"text/tabwriter"

	"github.com/scalechat/scalechat/internal/results"
)

// loopbackURL reports whether rawURL's host is a loopback address, so the
// generator may spread its connections over the loopback sources (a
// remote server would not answer them).
func loopbackURL(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// perConnect formats µs of server CPU per connection accepted ("-" for
// none measured).
func perConnect(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

// ratioRow is one target's server figures over the first target's, in one
// step: how many times the first's cost the other one pays (0: not
// measured on one side; a CPU ratio of a side whose CPU held too few clock
// ticks is withheld, *TooFew).
type ratioRow struct {
	target, base, step            string
	cpuDelivery, cpuConnect, rssC float64
	deliveryTooFew, connectTooFew bool
}

// targetRatios compares every target after the first with the first, step
// by step, on the server's costs: CPU per delivery, CPU per connection
// accepted and memory per connection.
func targetRatios(rows []results.TargetRow) []ratioRow {
	if len(rows) == 0 {
		return nil
	}
	first := rows[0].Target
	base := map[string]results.TargetRow{}
	for _, r := range rows {
		if r.Target == first && r.Step != "" {
			base[r.Step] = r
		}
	}
	var out []ratioRow
	for _, r := range rows {
		b, ok := base[r.Step]
		if r.Target == first || !ok || r.Failure() != "" || b.Failure() != "" {
			continue
		}
		x := ratioRow{target: r.Target, base: first, step: r.Step, cpuConnect: over(r.CPUPerConnect, b.CPUPerConnect), rssC: over(r.RSSPerConn, b.RSSPerConn),
			deliveryTooFew: r.CPUDeliveryTooFew || b.CPUDeliveryTooFew, connectTooFew: r.CPUConnectTooFew || b.CPUConnectTooFew}
		if r.Measured() && b.Measured() {
			x.cpuDelivery = over(r.CPUPerDelivery, b.CPUPerDelivery)
		}
		out = append(out, x)
	}
	return out
}

// over is a/b, or 0 when either is not a measurement.
func over(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// printRatios prints targetRatios under the table, when there are two
// targets or more.
func printRatios(w io.Writer, rows []results.TargetRow) {
	rs := targetRatios(rows)
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w, "server costs over the first target's (×1 = the same; n/a = not measured on one side):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tover\tstep\tCPU/delivery\tCPU/connect\tRSS/conn\t")
	short := false
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.target, r.base, r.step,
			cpuTimes(r.cpuDelivery, r.deliveryTooFew), cpuTimes(r.cpuConnect, r.connectTooFew), times(r.rssC))
		short = short || r.deliveryTooFew || r.connectTooFew
	}
	tw.Flush()
	if short {
		fmt.Fprintf(w, "– = a side's CPU time held fewer than %d clock ticks of 10 ms, too few to read it to 10 %% (see its row's note)\n", results.MinCPUTicks)
	}
}

// cpuTimes formats a CPU ratio: "–" when a side's CPU held too few ticks.
func cpuTimes(v float64, tooFew bool) string {
	if tooFew {
		return "–"
	}
	return times(v)
}
