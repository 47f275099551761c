package diff

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/analyze"
	"github.com/scalechat/scalechat/internal/results"
)

// Load reads one run for a diff. path is the CSV file of a run (.csv or
// .csv.gz), its meta.json, the --out path given to loadtest, or a folder
// written by analyze --out, whose inputs are read again: the bootstrap
// needs the events' windows, which the summary files do not keep. The run's
// events are analysed in windows of interval; its server CSV, when the run
// scraped one, gives the CPU per delivery.
func Load(ctx context.Context, path string, interval time.Duration) (*Run, error) {
	inputs, metaPath, err := resolve(path)
	if err != nil {
		return nil, err
	}
	opts := analyze.Options{Windows: true, Interval: interval}
	for _, in := range inputs {
		opts.Inputs = append(opts.Inputs, analyze.Input{Path: in})
	}
	res, err := analyze.Run(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := res.Check(0.01); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if metaPath != "" {
		if err := analyze.AttachMeta(res, metaPath); err != nil {
			return nil, fmt.Errorf("%s: read metadata: %w", path, err)
		}
	} else if p := results.ServerMetricsPath(inputs[0]); fileExists(p) {
		res.ServerMetrics = p
	}
	var server []results.ServerRow
	if res.ServerMetrics != "" {
		if server, _, err = results.ReadServer(res.ServerMetrics); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return build(path, res, server), nil
}

// build turns an analysis with windows (and the run's server rows) into a Run.
func build(name string, res *analyze.Result, server []results.ServerRow) *Run {
	r := &Run{Name: name}
	for _, s := range res.Steps {
		st := Step{Name: s.Step, Scraped: res.ServerMetrics != ""}
		if s.Saturated {
			st.Saturated = cmpOr(s.SaturationReason, "saturated")
		}
		for _, w := range res.Windows {
			if w.Step != s.Step {
				continue
			}
			win := Window{Expected: w.Expected, Received: w.Received}
			w.Latency.Each(func(us int64, n uint64) { win.Latency = append(win.Latency, Bucket{us, n}) })
			st.Windows = append(st.Windows, win)
		}
		from, to := s.StartUnixUS, s.EndUnixUS
		if res.Meta != nil {
			for _, m := range res.Meta.Steps {
				if m.Name == s.Step && !m.SendStartedAt.IsZero() && m.SendEndedAt.After(m.SendStartedAt) {
					from, to = m.SendStartedAt.UnixMicro(), m.SendEndedAt.UnixMicro()
				}
			}
		}
		st.CPU = cpuWindows(server, from, to)
		r.Steps = append(r.Steps, st)
	}
	return r
}

func cmpOr(a, b string) string { return cmp.Or(a, b) }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// cpuWindows returns the scrape intervals of each node that lie within
// [from, to] µs: the CPU seconds spent and deliveries made in each. An
// interval with a missing figure or a counter that went back (a restarted
// node) is left out.
func cpuWindows(rows []results.ServerRow, from, to int64) []CPUWindow {
	byNode := make(map[string][]results.ServerRow)
	var nodes []string
	for _, r := range rows {
		if r.UnixUS < from || r.UnixUS > to {
			continue
		}
		if _, ok := byNode[r.Node]; !ok {
			nodes = append(nodes, r.Node)
		}
		byNode[r.Node] = append(byNode[r.Node], r)
	}
	var out []CPUWindow
	for _, n := range nodes {
		rs := byNode[n]
		slices.SortFunc(rs, func(a, b results.ServerRow) int { return cmp.Compare(a.UnixUS, b.UnixUS) })
		for i := 1; i < len(rs); i++ {
			cpu, del := rs[i].CPUSeconds-rs[i-1].CPUSeconds, rs[i].Deliveries-rs[i-1].Deliveries
			if math.IsNaN(cpu) || math.IsNaN(del) || cpu < 0 || del < 0 {
				continue
			}
			out = append(out, CPUWindow{CPUSeconds: cpu, Deliveries: del})
		}
	}
	return out
}

// resolve finds the CSV files and the meta.json of the run at path.
func resolve(path string) (inputs []string, meta string, err error) {
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return fromAnalysis(path)
	case strings.HasSuffix(path, ".meta.json"):
		return fromMeta(path)
	case err == nil:
		meta, err := analyze.FindMeta([]string{path})
		return []string{path}, meta, err
	case !errors.Is(err, fs.ErrNotExist):
		return nil, "", err
	}
	// The --out of a run with several workers: its parts are named in
	// <out>.meta.json.
	m, _ := results.Paths(path, 1)
	if _, err := os.Stat(m); err == nil {
		return fromMeta(m)
	}
	return nil, "", fmt.Errorf("%s is neither a run (its CSV file or meta.json) nor a folder written by analyze --out", path)
}

// fromMeta returns the parts a run's meta.json names, beside it.
func fromMeta(path string) ([]string, string, error) {
	m, err := results.ReadMeta(path)
	if err != nil {
		return nil, "", err
	}
	if len(m.Parts) == 0 {
		return nil, "", fmt.Errorf("%s names no CSV part: the run wrote no events (--no-csv?), and a diff needs them", path)
	}
	var inputs []string
	for _, p := range m.Parts {
		inputs = append(inputs, filepath.Join(filepath.Dir(path), p))
	}
	return inputs, path, nil
}

// fromAnalysis returns the inputs of an analyze --out folder.
func fromAnalysis(dir string) ([]string, string, error) {
	s, err := results.ReadSummary(filepath.Join(dir, results.SummaryJSON))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%s holds no %s: it is not a folder written by analyze --out", dir, results.SummaryJSON)
	}
	if err != nil {
		return nil, "", err
	}
	var inputs []string
	for _, in := range s.Inputs {
		if _, err := os.Stat(in); err != nil && !filepath.IsAbs(in) {
			in = filepath.Join(dir, in) // written relative to the folder
		}
		if _, err := os.Stat(in); err != nil {
			return nil, "", fmt.Errorf("%s is an analysis whose CSV file %s is gone: a diff needs the run's events", dir, in)
		}
		inputs = append(inputs, in)
	}
	if len(inputs) == 0 {
		return nil, "", fmt.Errorf("%s is an analysis that names no input", dir)
	}
	return inputs, s.MetaPath, nil
}
