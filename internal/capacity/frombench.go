package capacity

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/scalechat/scalechat/benchmarks"
	"github.com/scalechat/scalechat/internal/results"
)

// repeatLabel is the "#2 " that scalechat bench --repeat puts before a row.
var repeatLabel = regexp.MustCompile(`^#\d+ `)

// LabDir is where the committed results live in the repository; the
// binary embeds them.
const LabDir = "benchmarks/results"

// LabFigures are the costs of the committed results (benchmarks/results,
// measured on the lab's machine, which docs/benchmarks.md names):
// scalechat plan uses them unless --from names a bench file measured on
// the user's own. Each figure comes from the newest file that has it.
func LabFigures() ([]Figure, error) {
	return FromResults(benchmarks.Results(), LabDir)
}

// FromResults reads the figures from every results file (*.json) of fsys,
// named dir in their sources: for each figure, the newest file (by date,
// then name) that has it. A figure no file has is an error.
func FromResults(fsys fs.FS, dir string) ([]Figure, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, fmt.Errorf("list the results of %s: %w", dir, err)
	}
	var files []results.BenchFile
	for _, n := range names {
		f, err := results.ReadBenchFS(fsys, n)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(files[a].Date, files[b].Date) })
	got := map[string]Figure{}
	for _, i := range order {
		if files[i].Smoke {
			continue
		}
		for k, f := range figuresOf(files[i], path.Join(dir, names[i])) {
			got[k] = f
		}
	}
	var figs []Figure
	for _, k := range figureKeys() {
		f, ok := got[k.key]
		if !ok {
			return nil, fmt.Errorf("no results file of %s has the figure %s (run scalechat bench --json FILE idle rooms oneroom compression cluster transports)", dir, k.key)
		}
		figs = append(figs, f)
	}
	for _, k := range natsKeys() {
		if f, ok := got[k.key]; ok {
			figs = append(figs, f)
		}
	}
	return figs, nil
}

// FromBench reads the figures from a file of scalechat bench --json (run
// it with: idle rooms oneroom compression cluster transports). A row measured several
// times (--repeat) gives its median. Figures the file lacks are taken from
// LabFigures, and their source says so.
func FromBench(file string) ([]Figure, error) {
	f, err := results.ReadBenchFile(file)
	if err != nil {
		return nil, err
	}
	if f.Smoke {
		return nil, fmt.Errorf("%s is a --smoke run, whose figures mean nothing", file)
	}
	got := figuresOf(f, file)
	if len(got) == 0 {
		return nil, fmt.Errorf("%s has none of the rows scalechat plan needs (run scalechat bench --json FILE idle rooms oneroom compression cluster transports)", file)
	}
	lab, err := LabFigures()
	if err != nil {
		return nil, err
	}
	var figs []Figure
	for _, d := range lab {
		if g, ok := got[d.Key]; ok {
			figs = append(figs, g)
			continue
		}
		d.Source = "not in " + file + ", so " + d.Source
		figs = append(figs, d)
	}
	for _, k := range natsKeys() {
		if g, ok := got[k.key]; ok && !slices.ContainsFunc(lab, func(d Figure) bool { return d.Key == k.key }) {
			figs = append(figs, g)
		}
	}
	return figs, nil
}

// figuresOf picks the figures the model needs from a results file's rows:
// the median of the rows of each (a row repeated by --repeat counts once
// a run; the medians rows --repeat adds are left out, being of the same
// runs).
func figuresOf(f results.BenchFile, name string) map[string]Figure {
	when := f.Date
	if !f.StartedAt.IsZero() {
		when = f.StartedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	src := fmt.Sprintf("%s (%s, %s, %s)", name, f.Version, f.Machine, when)
	// A row on NATS (engine nats) counts for the NATS figures only.
	onNATS := false
	pick := func(match func(string) bool, value func(results.BenchRow) float64) float64 {
		var vs []float64
		for _, r := range f.Rows {
			name := repeatLabel.ReplaceAllString(r.Scenario, "")
			if strings.Contains(name, "median of") || !match(name) || (r.Engine == "nats") != onNATS {
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
	// The cluster's rows of rooms of 4 are "cluster 500×4: SETUP"; the
	// single node was "cluster: 1 node, no Redis" before the rooms of 50.
	small := func(setup string) func(string) bool {
		return func(s string) bool {
			return strings.HasPrefix(s, "cluster ") && strings.Contains(s, "×4: "+setup) || setup == "1 node" && s == "cluster: 1 node, no Redis"
		}
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
	values := map[string]float64{
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
	// The cluster's rows on NATS: "cluster 500×4: 2 nodes on NATS, SETUP".
	onNATS = true
	values[KeySplitNATS] = pick(small("2 nodes on NATS, rooms split"), func(r results.BenchRow) float64 { return r.NATSPerDel })
	values[KeyOwnedNATS] = pick(small("2 nodes on NATS, rooms on A"), func(r results.BenchRow) float64 { return r.NATSPerDel })
	got := map[string]Figure{}
	for _, k := range append(figureKeys(), natsKeys()...) {
		if v := values[k.key]; v > 0 {
			got[k.key] = Figure{Key: k.key, Value: v, Unit: k.unit, Source: src, Rate: rates[k.key]}
		}
	}
	return got
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
