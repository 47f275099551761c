package capacity

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
)

// repeatLabel is the "#2 " that scalechat bench --repeat puts before a row.
var repeatLabel = regexp.MustCompile(`^#\d+ `)

// FromBench reads the figures from a file of scalechat bench --json (run
// it with: idle rooms oneroom compression cluster transports). A row measured several
// times (--repeat) gives its median. Figures the file lacks are taken from
// DefaultFigures, and their source says so.
func FromBench(path string) ([]Figure, error) {
	f, err := results.ReadBenchFile(path)
	if err != nil {
		return nil, err
	}
	if f.Smoke {
		return nil, fmt.Errorf("%s is a --smoke run, whose figures mean nothing", path)
	}
	src := fmt.Sprintf("%s (%s, %s, %s)", path, f.Version, f.Machine, f.StartedAt.Format("2006-01-02 15:04 UTC"))
	pick := func(match func(string) bool, value func(results.BenchRow) float64) float64 {
		var vs []float64
		for _, r := range f.Rows {
			name := repeatLabel.ReplaceAllString(r.Scenario, "")
			if strings.Contains(name, "median of") || !match(name) {
				continue
			}
			if v := value(r); v > 0 {
				vs = append(vs, v)
			}
		}
		return median(vs)
	}
	perSecond := func(r results.BenchRow) float64 {
		if r.CPUPerDel <= 0 {
			return 0
		}
		return r.PerSecond
	}
	perDel := func(r results.BenchRow) float64 { return r.CPUPerDel }
	small := func(setup string) func(string) bool {
		return func(s string) bool { return strings.HasPrefix(s, "cluster ") && strings.Contains(s, "×4: "+setup) }
	}
	busy := func(s string) bool { return strings.HasPrefix(s, "rooms ") && strings.HasSuffix(s, "×4") }
	big := func(s string) bool { return s == "oneroom n=200" }
	mid := func(s string) bool { return s == "compression 256 B off" }
	rates := map[string]float64{
		KeyBusySmall:  pick(busy, perSecond),
		KeyLightSmall: pick(small("1 node"), perSecond),
		KeyBigRoom:    pick(big, perSecond),
		KeyMidRooms:   pick(mid, perSecond),
	}
	got := map[string]float64{
		KeyBusySmall:  pick(busy, perDel),
		KeyLightSmall: pick(small("1 node"), perDel),
		KeyBigRoom:    pick(big, perDel),
		KeyMidRooms:   pick(mid, perDel),
		KeyIdleKiB:    pick(func(s string) bool { return s == "idle" }, func(r results.BenchRow) float64 { return kibFigure(r.Figure) }),
		KeyConnectUS: pick(func(s string) bool { return strings.HasPrefix(s, "transports websocket") }, func(r results.BenchRow) float64 {
			if r.Clients == 0 {
				return 0
			}
			return r.ServerCPU * 1e6 / float64(r.Clients)
		}),
		KeySplitRatio: pick(small("2 nodes, rooms split"), func(r results.BenchRow) float64 { return r.NodeRatio }),
		KeySplitRedis: pick(small("2 nodes, rooms split"), func(r results.BenchRow) float64 { return r.RedisPerDel }),
		KeyOwnedRatio: pick(small("2 nodes, rooms on A"), func(r results.BenchRow) float64 { return r.NodeRatio }),
		KeyOwnedRedis: pick(small("2 nodes, rooms on A"), func(r results.BenchRow) float64 { return r.RedisPerDel }),
	}
	var figs []Figure
	found := 0
	for _, d := range DefaultFigures() {
		if v := got[d.Key]; v > 0 {
			if found > 0 && figs[len(figs)-1].Key == d.Key {
				continue // one figure of the file stands for the doc's runs of that row
			}
			figs = append(figs, Figure{Key: d.Key, Value: v, Unit: d.Unit, Source: src, Rate: rates[d.Key]})
			found++
			continue
		}
		d.Source = "not in " + path + ", so docs/benchmarks.md: " + d.Source
		d.Quote = ""
		figs = append(figs, d)
	}
	if found == 0 {
		return nil, fmt.Errorf("%s has none of the rows scalechat plan needs (run scalechat bench --json FILE idle rooms oneroom compression cluster transports)", path)
	}
	return figs, nil
}

// kibFigure reads "1.26 KiB/conn".
func kibFigure(s string) float64 {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), " KiB/conn")
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0
	}
	return v
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
