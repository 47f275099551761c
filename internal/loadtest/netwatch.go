//go:build linux

package loadtest

import (
	"fmt"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
)

// saturationNet is the share of a link's speed from which the link counts
// as full, in either direction (links are full duplex).
const saturationNet = 0.90

// netWatch notices a network link of the generator's machine running
// full. It is not the generator's saturation: a full link caps what any
// server behind it gets, so a step stays valid, but its misses are the
// network's, which --find names as the first limit. Loopback has no speed
// and is never full: on one machine the network's cost is CPU.
type netWatch struct {
	read  func() ([]procstat.NetDev, error)
	speed func(name string) (bitsPerSec float64, ok bool)
	now   func() time.Time

	prev map[string]procstat.NetDev
	at   time.Time
}

func newNetWatch() *netWatch {
	return &netWatch{read: procstat.ReadNetDev, speed: procstat.LinkSpeed, now: time.Now}
}

// full reads the counters and returns which link ran at saturationNet of
// its speed or more since the previous call, or "". The first call, and a
// call after an unreadable /proc/net/dev, only takes a reading.
func (w *netWatch) full() string {
	devs, err := w.read()
	now := w.now()
	prev, since := w.prev, now.Sub(w.at).Seconds()
	w.prev, w.at = nil, now
	if err != nil {
		return ""
	}
	w.prev = make(map[string]procstat.NetDev, len(devs))
	for _, d := range devs {
		w.prev[d.Name] = d
	}
	if prev == nil || since <= 0 {
		return ""
	}
	for _, d := range devs {
		p, seen := prev[d.Name]
		bps, ok := w.speed(d.Name)
		if !seen || !ok || d.Name == "lo" {
			continue
		}
		rx := float64(d.RxBytes-min(p.RxBytes, d.RxBytes)) * 8 / since
		tx := float64(d.TxBytes-min(p.TxBytes, d.TxBytes)) * 8 / since
		switch {
		case rx >= saturationNet*bps:
			return fmt.Sprintf("%s received %s of its %s link", d.Name, fmtBits(rx), fmtBits(bps))
		case tx >= saturationNet*bps:
			return fmt.Sprintf("%s sent %s of its %s link", d.Name, fmtBits(tx), fmtBits(bps))
		}
	}
	return ""
}

// fmtBits writes a rate in bits per second as Mb/s or Gb/s.
func fmtBits(bps float64) string {
	if bps >= 1e9 {
		return fmt.Sprintf("%.2f Gb/s", bps/1e9)
	}
	return fmt.Sprintf("%.0f Mb/s", bps/1e6)
}
