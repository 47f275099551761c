// Command analyze benchmarks `scalechat analyze` against a plain pandas
// script doing the same join (baseline.py), side by side on one realistic
// CSV file that it generates once under /tmp:
//
//	go run ./bench/analyze                 # 1 GB, 3 runs of analyze, 1 of pandas
//	go run ./bench/analyze -size 100MB -runs 5
//
// It prints the MB/s of each, the ratio, and checks that both found the same
// counts per step.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-analyze:", err)
		os.Exit(1)
	}
}

func run() error {
	size := flag.String("size", "1GB", "size of the generated CSV (e.g. 100MB, 1GB)")
	file := flag.String("file", "", "CSV file to use or create (default /tmp/scalechat-bench-analyze-SIZE.csv)")
	runs := flag.Int("runs", 3, "runs of scalechat analyze (the median is reported)")
	pandasRuns := flag.Int("pandas-runs", 1, "runs of the pandas baseline (0: skip it)")
	python := flag.String("python", "python3", "Python interpreter with pandas installed")
	flag.Parse()
	if *runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}

	n, err := parseSize(*size)
	if err != nil {
		return err
	}
	path := *file
	if path == "" {
		path = fmt.Sprintf("/tmp/scalechat-bench-analyze-%s.csv", strings.ToLower(*size))
	}
	if st, err := os.Stat(path); err != nil || st.Size() < n*9/10 {
		fmt.Printf("generating %s (%s)…\n", path, *size)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		t := time.Now()
		if _, err := generate(f, n, 1); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Printf("generated in %s\n", time.Since(t).Round(time.Millisecond))
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	mb := float64(st.Size()) / 1e6

	tmp, err := os.MkdirTemp("", "bench-analyze-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "scalechat")
	build := exec.Command("go", "build", "-o", bin, "./cmd/scalechat")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build scalechat (run from the repository root): %w", err)
	}
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	fmt.Printf("file %s: %.0f MB; %d CPUs, GOMAXPROCS %d, %s, commit %s\n",
		path, mb, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), strings.TrimSpace(string(commit)))

	// Warm the page cache so that both tools read from memory.
	if err := exec.Command("cat", path).Run(); err != nil {
		return err
	}

	var goTimes, goCPU []float64
	out := filepath.Join(tmp, "out")
	for i := range *runs {
		cmd := exec.Command(bin, "analyze", "--out", out, path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("scalechat analyze: %w: %s", err, stderr.String())
		}
		d := time.Since(t).Seconds()
		cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
		goTimes = append(goTimes, d)
		goCPU = append(goCPU, cpu)
		fmt.Printf("  scalechat analyze run %d: %.2f s, %.0f MB/s (CPU %.2f s)\n", i+1, d, mb/d, cpu)
	}
	goMed := median(goTimes)
	fmt.Printf("scalechat analyze: median %.2f s = %.0f MB/s; best %.0f MB/s; median CPU %.2f s (%.0f MB per CPU-second)\n",
		goMed, mb/goMed, mb/slices.Min(goTimes), median(goCPU), mb/median(goCPU))
	if *pandasRuns == 0 {
		return nil
	}
	var pyTimes, pyCPU []float64
	var pyOut []byte
	for i := range *pandasRuns {
		cmd := exec.Command(*python, "bench/analyze/baseline.py", path)
		cmd.Stderr = os.Stderr
		t := time.Now()
		b, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("pandas baseline: %w", err)
		}
		d := time.Since(t).Seconds()
		cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
		pyTimes = append(pyTimes, d)
		pyCPU = append(pyCPU, cpu)
		pyOut = b
		fmt.Printf("  pandas run %d: %.2f s, %.1f MB/s (CPU %.2f s)\n", i+1, d, mb/d, cpu)
	}
	pyMed := median(pyTimes)
	fmt.Printf("pandas baseline:   median %.2f s = %.1f MB/s; median CPU %.2f s\n", pyMed, mb/pyMed, median(pyCPU))
	fmt.Printf("ratio: scalechat analyze is %.1f× faster than pandas (wall, medians); %.1f× less CPU\n",
		pyMed/goMed, median(pyCPU)/median(goCPU))
	return crossCheck(filepath.Join(out, "summary.json"), pyOut)
}

// crossCheck compares the per-step counts of both tools and the p50/p99
// within 1 % (pandas interpolates between samples; analyze reports the
// nearest rank from a 3-digit histogram).
func crossCheck(summary string, py []byte) error {
	b, err := os.ReadFile(summary)
	if err != nil {
		return err
	}
	var ours struct {
		Steps []map[string]any `json:"steps"`
	}
	if err := json.Unmarshal(b, &ours); err != nil {
		return err
	}
	var theirs map[string]map[string]float64
	if err := json.Unmarshal(py, &theirs); err != nil {
		return fmt.Errorf("pandas output: %w", err)
	}
	bad := 0
	for _, s := range ours.Steps {
		name := s["step"].(string)
		p, ok := theirs[name]
		if !ok {
			fmt.Printf("cross-check: step %s missing in pandas output\n", name)
			bad++
			continue
		}
		for _, k := range []string{"sent", "expected", "received", "lost", "orphans"} {
			if s[k].(float64) != p[k] {
				fmt.Printf("cross-check: step %s %s: analyze %v, pandas %v\n", name, k, s[k], p[k])
				bad++
			}
		}
		for _, k := range []string{"p50_ms", "p99_ms", "mean_ms", "max_ms"} {
			a, q := s[k].(float64), p[k]
			if math.Abs(a-q) > 0.01*q+0.002 {
				fmt.Printf("cross-check: step %s %s: analyze %v, pandas %v\n", name, k, a, q)
				bad++
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("cross-check: %d differences", bad)
	}
	fmt.Printf("cross-check: %d steps, same counts, p50/p99/mean/max within 1%%\n", len(ours.Steps))
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func parseSize(s string) (int64, error) {
	u := strings.ToUpper(s)
	mult := int64(1)
	for _, x := range []struct {
		suf string
		m   int64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if strings.HasSuffix(u, x.suf) {
			u, mult = strings.TrimSuffix(u, x.suf), x.m
			break
		}
	}
	v, err := strconv.ParseFloat(u, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad -size %q", s)
	}
	return int64(v * float64(mult)), nil
}
