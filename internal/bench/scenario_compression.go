//go:build linux

package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// Scenario: permessage-deflate on vs off.

// runCompression measures permessage-deflate: rooms of 10, 1 msg/s per
// client, messages of 256 B and 4 KiB, each size with the clients offering
// compression and without, against a server started with --compression.
// Per run: server CPU and bytes written per delivery.
func runCompression(ctx context.Context, r *runner) ([]Result, error) {
	rooms := r.size(200, 4)
	dur := r.dur(10*time.Second, time.Second)
	var rows []Result
	for _, size := range []int{256, 4096} {
		perDel := map[bool][2]float64{} // CPU µs and bytes per delivery
		for _, on := range []bool{false, true} {
			row, bytesPer, err := r.compressionRun(ctx, rooms, size, on, dur)
			if err != nil {
				return rows, err
			}
			perDel[on] = [2]float64{row.CPUPerDel, bytesPer}
			rows = append(rows, row)
		}
		off, on := perDel[false], perDel[true]
		if off[1] > 0 {
			// A run whose CPU held too few of the clock's ticks (--smoke)
			// has no CPU figure: its ratio is "–", the bytes' still holds.
			cpu := "–"
			note := "server CPU and bytes written per delivery; the generator's text is one letter repeated, so bytes shrink far more than real chat text would"
			if off[0] > 0 && on[0] > 0 {
				cpu = fmt.Sprintf("×%.2f", on[0]/off[0])
			} else {
				note += fmt.Sprintf("; CPU: – (a run's CPU held fewer than %d clock ticks of 10 ms, too few to read to 10 %%)", results.MinCPUTicks)
			}
			rows = append(rows, Result{Scenario: fmt.Sprintf("compression %d B: on vs off", size), Ratio: -1,
				Figure: fmt.Sprintf("CPU %s, bytes ×%.2f", cpu, on[1]/off[1]), Note: note})
		}
	}
	return rows, nil
}

func (r *runner) compressionRun(ctx context.Context, rooms, size int, on bool, dur time.Duration) (Result, float64, error) {
	name := fmt.Sprintf("compression-%d-%s", size, onOff(on))
	port, err := freePort()
	if err != nil {
		return Result{}, 0, err
	}
	metricsURL := "http://127.0.0.1:" + itoa(port) + "/metrics"
	srv, err := r.startServer(ctx, name+"-server", "--compression", "--metrics-addr", "127.0.0.1:"+itoa(port))
	if err != nil {
		return Result{}, 0, err
	}
	defer srv.shutdown(5 * time.Second)
	before, err := serverBytes(metricsURL)
	if err != nil {
		return Result{}, 0, err
	}
	args := []string{"--rooms", itoa(rooms), "--room-size", "10", "--msg-frequency", "1s", "--msg-size", itoa(size),
		"--duration", dur.String(), "--ramp", "5000", "--drain", "3s", "--source-ips", sources}
	if on {
		args = append(args, "--compression")
	}
	g, err := r.runLoadtest(ctx, name, wsURL(srv), timeoutFor(10*rooms, 5000, dur), args...)
	if err != nil {
		return Result{}, 0, err
	}
	after, err := serverBytes(metricsURL)
	if err != nil {
		return Result{}, 0, err
	}
	row := trafficRow(fmt.Sprintf("compression %d B %s", size, onOff(on)), g, srv)
	var bytesPer float64
	if s := g.step(); s.ReceivedAll > 0 {
		bytesPer = float64(after[1]-before[1]) / float64(s.ReceivedAll)
		row.Figure = fmt.Sprintf("%.0f B/deliv out", bytesPer)
	}
	return row, bytesPer, nil
}
