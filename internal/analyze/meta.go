package analyze

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Meta is a run's <out>.meta.json (docs/csv.md).
type Meta struct {
	Tool          string         `json:"tool,omitempty"`
	Version       string         `json:"version,omitempty"`
	StartedAt     string         `json:"started_at,omitempty"`
	EndedAt       string         `json:"ended_at,omitempty"`
	Args          []string       `json:"args,omitempty"`
	Machine       map[string]any `json:"machine,omitempty"`
	Parts         []string       `json:"parts,omitempty"`
	ServerMetrics string         `json:"server_metrics,omitempty"`
	Steps         []MetaStep     `json:"steps,omitempty"`
}

// MetaStep is one step of Meta. Only the fields analyze uses are typed;
// the rest are kept as the loadtest wrote them.
type MetaStep struct {
	Name             string `json:"name"`
	Saturated        bool   `json:"saturated"`
	SaturationReason string `json:"saturation_reason,omitempty"`
	Rest             map[string]any
}

// UnmarshalJSON keeps every field of the step.
func (s *MetaStep) UnmarshalJSON(b []byte) error {
	type plain MetaStep
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &p.Rest); err != nil {
		return err
	}
	*s = MetaStep(p)
	return nil
}

// MarshalJSON writes the step as it was read.
func (s MetaStep) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(s.Rest)+3)
	for k, v := range s.Rest {
		m[k] = v
	}
	m["name"], m["saturated"] = s.Name, s.Saturated
	if s.SaturationReason != "" {
		m["saturation_reason"] = s.SaturationReason
	}
	return json.Marshal(m)
}

// ReadMeta reads a meta.json file.
func ReadMeta(path string) (*Meta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// baseName strips .gz and .csv from a file name.
func baseName(path string) string {
	p := strings.TrimSuffix(path, ".gz")
	return strings.TrimSuffix(p, ".csv")
}

// FindMeta looks for the meta.json of the inputs: <out>.meta.json beside an
// input named <out>.csv[.gz], or a *.meta.json in an input's folder whose
// "parts" list names the input (worker and shard parts). It returns "" when
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
			m, err := ReadMeta(mp)
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
func serverMetricsPath(metaPath string, m *Meta) string {
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
	m, err := ReadMeta(path)
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
