//go:build linux

package loadtest

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Saturation thresholds (issue: the generator is the bottleneck).
const (
	saturationCPU   = 0.90
	saturationLagUs = 100_000
)

// aggregator merges the snapshots of one or more parts, prints the live
// progress line and notices when the generator itself is saturated.
type aggregator struct {
	w     io.Writer
	tty   bool
	cores int // cores of the machine the parts share

	mu        sync.Mutex
	prev      []counter         // each part's counters in the previous update
	saturated map[string]string // step name -> first reason
	net       *netWatch         // nil: the links are not watched
	network   map[string]string // step name -> the first full link
	lastLen   int
}

func newAggregator(w io.Writer, tty bool, cores int) *aggregator {
	return &aggregator{w: w, tty: tty, cores: max(cores, 1), saturated: map[string]string{},
		net: newNetWatch(), network: map[string]string{}}
}

// update merges one snapshot per part, evaluates saturation and prints.
func (a *aggregator) update(snaps []Snapshot) {
	if len(snaps) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Read the links at every update, pauses too, so that each reading
	// spans about one interval.
	link := ""
	if a.net != nil {
		link = a.net.full()
	}
	var m Snapshot
	lat, lag := newHist(), newHist()
	var interval float64
	cores := 0
	for _, s := range snaps {
		if m.Step == "" || s.Phase != phaseDone && s.Phase != "" {
			m.Step, m.Phase, m.Elapsed, m.PhaseLen = s.Step, s.Phase, s.Elapsed, s.PhaseLen
		}
		m.Target += s.Target
		m.Connected += s.Connected
		m.ConnectErrors += s.ConnectErrors
		m.Disconnects += s.Disconnects
		m.Sent += s.Sent
		m.Received += s.Received
		m.Expected += s.Expected
		m.Unexpected += s.Unexpected
		m.CPUSeconds += s.CPUSeconds
		interval = max(interval, s.Interval)
		cores += s.Cores
		decodeInto(lat, s.Lat)
		decodeInto(lag, s.Lag)
	}
	if m.Phase == "" || m.Phase == phaseDone {
		return
	}
	cores = min(cores, a.cores)
	if interval <= 0 {
		interval = 1
	}
	sent, recv := a.counted(snaps)
	sentRate, recvRate := float64(sent)/interval, float64(recv)/interval
	cpu := m.CPUSeconds / interval / float64(max(cores, 1))

	if m.Phase == phaseSending || m.Phase == phaseDraining {
		reason := ""
		switch {
		case cpu >= saturationCPU:
			reason = fmt.Sprintf("generator CPU %.0f%% of %d cores", 100*cpu, cores)
		case lag.TotalCount() > 0 && lag.ValueAtQuantile(99) > saturationLagUs:
			reason = fmt.Sprintf("send lag p99 %s", fmtUs(lag.ValueAtQuantile(99)))
		}
		if reason != "" && a.saturated[m.Step] == "" {
			a.saturated[m.Step] = reason
		}
		if link != "" && a.network[m.Step] == "" {
			a.network[m.Step] = link
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", m.Step, m.Phase)
	if m.PhaseLen > 0 {
		fmt.Fprintf(&b, " %.0f/%.0fs", min(m.Elapsed, m.PhaseLen), m.PhaseLen)
	} else {
		fmt.Fprintf(&b, " %.0fs", m.Elapsed)
	}
	fmt.Fprintf(&b, " | conns %d/%d", m.Connected, m.Target)
	if n := m.ConnectErrors + m.Disconnects; n > 0 {
		fmt.Fprintf(&b, " errors %d", n)
	}
	fmt.Fprintf(&b, " | sent %s/s recv %s/s", fmtCount(sentRate), fmtCount(recvRate))
	if m.Expected > 0 {
		fmt.Fprintf(&b, " | delivered %.2f%%", 100*float64(m.Received)/float64(m.Expected))
	}
	if m.Unexpected > 0 {
		fmt.Fprintf(&b, " | UNEXPECTED %d", m.Unexpected)
	}
	if lat.TotalCount() > 0 {
		fmt.Fprintf(&b, " | p50 %s p99 %s", fmtUs(lat.ValueAtQuantile(50)), fmtUs(lat.ValueAtQuantile(99)))
	}
	fmt.Fprintf(&b, " | cpu %.0f%%", 100*cpu)
	if r := a.saturated[m.Step]; r != "" {
		b.WriteString(" | GENERATOR SATURATED: results not valid")
	}
	line := b.String()
	if a.tty {
		// Rewrite one line in place.
		fmt.Fprintf(a.w, "\r\033[K%s", line)
		a.lastLen = len(line)
	} else {
		fmt.Fprintf(a.w, "%s %s\n", time.Now().Format("15:04:05"), line)
	}
}

// counter is what a part had sent and received at a snapshot.
type counter struct{ sent, recv int64 }

// counted returns the messages sent and received since the previous
// update, summed over the parts. A part's counters count its current step
// and start again from 0 when its next step begins, which is later than
// the step's name changes (the pause between steps already carries the
// next step's name, the counters still the last step's): a counter lower
// than before has restarted, and all of it is new. Parts that came or
// went since the previous update count nothing this time.
func (a *aggregator) counted(snaps []Snapshot) (sent, recv int64) {
	cur := make([]counter, len(snaps))
	for i, s := range snaps {
		cur[i] = counter{s.Sent, s.Received}
	}
	if a.prev == nil {
		a.prev = make([]counter, len(cur)) // the first update counts from 0
	}
	if len(a.prev) == len(cur) {
		for i, c := range cur {
			sent += since(a.prev[i].sent, c.sent)
			recv += since(a.prev[i].recv, c.recv)
		}
	}
	a.prev = cur
	return sent, recv
}

// since returns how much a counter that may restart from 0 grew from prev
// to cur: never a negative count.
func since(prev, cur int64) int64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// saturation returns why step was saturated, or "".
func (a *aggregator) saturation(step string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.saturated[step]
}

// networkFull returns the first link that ran full in step, or "".
func (a *aggregator) networkFull(step string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.network[step]
}

// finish ends the live line.
func (a *aggregator) finish() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tty && a.lastLen > 0 {
		fmt.Fprint(a.w, "\n")
		a.lastLen = 0
	}
}

func fmtCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtUs(us int64) string {
	switch {
	case us >= 10_000_000:
		return fmt.Sprintf("%.0fs", float64(us)/1e6)
	case us >= 1_000_000:
		return fmt.Sprintf("%.2fs", float64(us)/1e6)
	case us >= 10_000:
		return fmt.Sprintf("%.0fms", float64(us)/1e3)
	}
	return fmt.Sprintf("%.2fms", float64(us)/1e3)
}
