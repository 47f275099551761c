package analyze

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/scalechat/scalechat/internal/results"
)

// baseName strips .gz and .csv from a file name.
func baseName(path string) string {
	p := strings.TrimSuffix(path, ".gz")
	return strings.TrimSuffix(p, ".csv")
}

// FindMeta looks for the meta.json of the inputs: <out>.meta.json beside an
// input named <out>.csv[.gz], or a *.meta.json in an input's folder whose
// "parts" list names the input (parser and partition parts). It returns "" when
// there is none.
func FindMeta(inputs []string) (string, error) {
	for _, in := range inputs {
		p := baseName(in) + ".meta.json"
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	dirs := make(map[string]bool)
	for _, in := range inputs {
		dir := filepath.Dir(in)
		if dirs[dir] {
			continue
		}
		dirs[dir] = true
		metas, err := filepath.Glob(filepath.Join(dir, "*.meta.json"))
		if err != nil {
			return "", err
		}
		for _, mp := range metas {
			m, err := results.ReadMeta(mp)
			if err != nil {
				continue // not ours to judge: another run's broken file
			}
			for _, in := range inputs {
				if slices.Contains(m.Parts, filepath.Base(in)) {
					return mp, nil
				}
			}
		}
	}
	return "", nil
}

// serverMetricsPath returns the server CSV of a run, or "".
func serverMetricsPath(metaPath string, m *results.Meta) string {
	var cands []string
	if m != nil && m.ServerMetrics != "" {
		p := m.ServerMetrics
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(metaPath), p)
		}
		cands = append(cands, p)
	}
	cands = append(cands, strings.TrimSuffix(metaPath, ".meta.json")+".server.csv")
	for _, p := range cands {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// AttachMeta reads the metadata at path into res: saturated steps and the
// server metrics file. A missing file is not an error.
func AttachMeta(res *Result, path string) error {
	m, err := results.ReadMeta(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	res.Meta, res.MetaPath = m, abs
	if sp := serverMetricsPath(abs, m); sp != "" {
		res.ServerMetrics = sp
	}
	for _, ms := range m.Steps {
		for i := range res.Steps {
			if res.Steps[i].Step == ms.Name {
				res.Steps[i].Saturated = ms.Saturated
				res.Steps[i].SaturationReason = ms.SaturationReason
			}
		}
		if ms.Saturated {
			res.Overall.Saturated = true
		}
	}
	return nil
}
