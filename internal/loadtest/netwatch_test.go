//go:build linux

package loadtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
)

// fakeLinks is a machine whose eth0 has a 1 Gb/s link, lo and a virtual
// interface none, and whose clock moves a second a reading.
type fakeLinks struct {
	devs []procstat.NetDev
	err  error
	t    time.Time
}

func (f *fakeLinks) watch() *netWatch {
	return &netWatch{
		read: func() ([]procstat.NetDev, error) { return f.devs, f.err },
		speed: func(name string) (float64, bool) {
			return 1e9, name == "eth0"
		},
		now: func() time.Time { f.t = f.t.Add(time.Second); return f.t },
	}
}

// add moves eth0's and veth0's counters by rx and tx bytes, lo's by far
// more than any link.
func (f *fakeLinks) add(rx, tx uint64) {
	if f.devs == nil {
		f.devs = []procstat.NetDev{{Name: "lo"}, {Name: "veth0"}, {Name: "eth0"}}
	}
	for i := range f.devs {
		d := &f.devs[i]
		if d.Name == "lo" {
			d.RxBytes, d.TxBytes = d.RxBytes+1e10, d.TxBytes+1e10
			continue
		}
		d.RxBytes, d.TxBytes = d.RxBytes+rx, d.TxBytes+tx
	}
}

func TestNetWatch(t *testing.T) {
	f := &fakeLinks{}
	w := f.watch()
	f.add(0, 0)
	if got := w.full(); got != "" {
		t.Errorf("first reading: %q, want none", got)
	}
	for i, tt := range []struct {
		rx, tx uint64 // bytes in the second
		want   string
	}{
		{100e6 / 8, 100e6 / 8, ""},
		{890e6 / 8, 10e6 / 8, ""},
		{941e6 / 8, 10e6 / 8, "eth0 received 941 Mb/s of its 1.00 Gb/s link"},
		{1e6, 950e6 / 8, "eth0 sent 950 Mb/s of its 1.00 Gb/s link"},
	} {
		f.add(tt.rx, tt.tx)
		if got := w.full(); got != tt.want {
			t.Errorf("second %d: %q, want %q", i+1, got, tt.want)
		}
	}
	// An unreadable /proc/net/dev says nothing, and the next reading only
	// starts again: the second in between is not counted as one.
	f.err = errors.New("no /proc")
	f.add(2e9, 0)
	if got := w.full(); got != "" {
		t.Errorf("unreadable: %q", got)
	}
	f.err = nil
	if got := w.full(); got != "" {
		t.Errorf("after an unreadable reading: %q", got)
	}
}

// TestProgressNetworkFull: a link full while a step sends is recorded for
// that step, not for one that did not send while it was.
func TestProgressNetworkFull(t *testing.T) {
	var out strings.Builder
	a := newAggregator(&out, false, 2)
	f := &fakeLinks{}
	a.net = f.watch()
	snap := func(step, phase string) Snapshot {
		return Snapshot{Step: step, Phase: phase, Target: 10, Connected: 10, Interval: 1}
	}
	for _, s := range []struct {
		step, phase string
		rx          uint64
	}{
		{"s1", phaseSending, 0},
		{"s1", phaseSending, 10e6},
		{"s2", phasePause, 125e6}, // full between the steps: nobody's
		{"s2", phaseSending, 10e6},
		{"s2", phaseDraining, 120e6},
	} {
		f.add(s.rx, 0)
		a.update([]Snapshot{snap(s.step, s.phase)})
	}
	if got := a.networkFull("s1"); got != "" {
		t.Errorf("s1: %q, want none", got)
	}
	if got := a.networkFull("s2"); got != "eth0 received 960 Mb/s of its 1.00 Gb/s link" {
		t.Errorf("s2: %q", got)
	}
}
