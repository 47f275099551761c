//go:build linux

package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/analyze"
	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/results"
)

// pandasBaseline is the plain pandas script `scalechat analyze` is measured
// against: the same join, written the usual way.
//
//go:embed analyze_baseline.py
var pandasBaseline []byte

// AnalyzeOptions configures the analyze benchmark: `scalechat analyze`
// against the pandas baseline, side by side on one generated CSV file.
type AnalyzeOptions struct {
	Size int64  // bytes of the generated CSV
	File string // the CSV (the steps file for "legacy") to use, created when missing or smaller than 90 % of Size
	// Format is "scalechat" (docs/csv.md) or "legacy": the older headerless
	// format with UUID ids, one file per step, read with --steps.
	Format     string
	Runs       int    // runs of scalechat analyze; the median is reported
	PandasRuns int    // runs of the pandas baseline; 0 skips it
	Python     string // interpreter with pandas
	Executable string // the scalechat binary; default: this one
	Stdout     io.Writer
}

// DefaultAnalyzeOptions returns the options of the documented run: 1 GB,
// 3 runs of analyze, 1 of pandas.
func DefaultAnalyzeOptions() AnalyzeOptions {
	return AnalyzeOptions{Size: 1e9, Runs: 3, PandasRuns: 1, Python: "python3", Format: "scalechat"}
}

// RunAnalyze times `scalechat analyze` (a child process, so its CPU time is
// its own) and the pandas baseline on the same file, prints MB/s of each and
// their ratio, and checks that both found the same counts per step.
func RunAnalyze(ctx context.Context, opt AnalyzeOptions) error {
	if opt.Runs < 1 {
		return errors.New("--runs must be at least 1")
	}
	if opt.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the scalechat binary: %w", err)
		}
		opt.Executable = exe
	}
	w := opt.Stdout
	files, input, err := ensureAnalyzeInput(w, &opt)
	if err != nil {
		return err
	}
	var total int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return err
		}
		total += st.Size()
	}
	mb := float64(total) / 1e6
	tmp, err := os.MkdirTemp("", "scalechat-bench-analyze-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(w, "%s format, %s: %.0f MB; %d CPUs, GOMAXPROCS %d, %s; load average %s\n",
		opt.Format, opt.File, mb, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), procstat.LoadAvg())
	// Warm the page cache so that both tools read from memory.
	if err := exec.CommandContext(ctx, "cat", files...).Run(); err != nil {
		return fmt.Errorf("read %s: %w", opt.File, err)
	}

	out := filepath.Join(tmp, "out")
	goWall, goCPU, err := timeRuns(ctx, w, "scalechat analyze", opt.Runs, mb, func() *exec.Cmd {
		return exec.CommandContext(ctx, opt.Executable, append([]string{"analyze", "--out", out}, input...)...)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "scalechat analyze: median %.2f s = %.0f MB/s; best %.0f MB/s; median CPU %.2f s (%.0f MB per CPU-second)\n",
		median(goWall), mb/median(goWall), mb/slices.Min(goWall), median(goCPU), mb/median(goCPU))
	if opt.PandasRuns == 0 {
		return nil
	}
	script := filepath.Join(tmp, "analyze_baseline.py")
	if err := os.WriteFile(script, pandasBaseline, 0o644); err != nil {
		return err
	}
	var pyOut bytes.Buffer
	pyWall, pyCPU, err := timeRuns(ctx, w, "pandas", opt.PandasRuns, mb, func() *exec.Cmd {
		pyOut.Reset()
		cmd := exec.CommandContext(ctx, opt.Python, append([]string{script}, input...)...)
		cmd.Stdout = &pyOut
		return cmd
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "pandas baseline:   median %.2f s = %.1f MB/s; median CPU %.2f s\n", median(pyWall), mb/median(pyWall), median(pyCPU))
	fmt.Fprintf(w, "ratio: scalechat analyze is %.1f× faster than pandas (wall, medians); %.1f× less CPU\n",
		median(pyWall)/median(goWall), median(pyCPU)/median(goCPU))
	return crossCheck(w, filepath.Join(out, results.SummaryJSON), pyOut.Bytes())
}

// ensureAnalyzeInput makes the benchmark's input unless it is there: it
// returns the files to read and the arguments that name them to analyze
// and to the pandas script.
func ensureAnalyzeInput(w io.Writer, opt *AnalyzeOptions) (files, args []string, err error) {
	switch opt.Format {
	case "scalechat":
		if opt.File == "" {
			opt.File = filepath.Join(os.TempDir(), fmt.Sprintf("scalechat-bench-analyze-%s.csv", SizeString(opt.Size)))
		}
		return []string{opt.File}, []string{opt.File}, ensureEventsFile(w, opt.File, opt.Size)
	case "legacy":
		if opt.File == "" {
			opt.File = filepath.Join(os.TempDir(), fmt.Sprintf("scalechat-bench-analyze-legacy-%s", SizeString(opt.Size)), "steps.txt")
		}
		files, err := legacyFiles(opt.File)
		if err != nil || sizeOf(files) < opt.Size*9/10 {
			fmt.Fprintf(w, "generating %s (%s, older format with UUID ids)…\n", filepath.Dir(opt.File), SizeString(opt.Size))
			t := time.Now()
			if _, err := generateLegacy(filepath.Dir(opt.File), opt.Size, 1); err != nil {
				return nil, nil, fmt.Errorf("generate %s: %w", opt.File, err)
			}
			fmt.Fprintf(w, "generated in %s\n", time.Since(t).Round(time.Millisecond))
			if files, err = legacyFiles(opt.File); err != nil {
				return nil, nil, err
			}
		}
		return files, []string{"--steps", opt.File}, nil
	}
	return nil, nil, fmt.Errorf("--format %q is not scalechat or legacy", opt.Format)
}

// legacyFiles lists the files a steps file names.
func legacyFiles(steps string) ([]string, error) {
	in, err := analyze.ReadSteps(steps)
	if err != nil {
		return nil, err
	}
	files := make([]string, len(in))
	for i, x := range in {
		files[i] = x.Path
	}
	return files, nil
}

func sizeOf(files []string) int64 {
	var n int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// ensureEventsFile generates path unless it holds at least 90 % of size.
func ensureEventsFile(w io.Writer, path string, size int64) error {
	if st, err := os.Stat(path); err == nil && st.Size() >= size*9/10 {
		return nil
	}
	fmt.Fprintf(w, "generating %s (%s)…\n", path, SizeString(size))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	t := time.Now()
	if _, err := generateEvents(f, size, 1); err != nil {
		f.Close()
		return fmt.Errorf("generate %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(w, "generated in %s\n", time.Since(t).Round(time.Millisecond))
	return nil
}

// timeRuns runs the command n times and returns each run's wall and CPU
// seconds.
func timeRuns(ctx context.Context, w io.Writer, name string, n int, mb float64, cmd func() *exec.Cmd) (wall, cpu []float64, err error) {
	for i := range n {
		c := cmd()
		var stderr bytes.Buffer
		c.Stderr = &stderr
		t := time.Now()
		if err := c.Run(); err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
		}
		d := time.Since(t).Seconds()
		u := (c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Seconds()
		wall, cpu = append(wall, d), append(cpu, u)
		fmt.Fprintf(w, "  %s run %d: %.2f s, %.1f MB/s (CPU %.2f s)\n", name, i+1, d, mb/d, u)
	}
	return wall, cpu, nil
}

// crossCheck compares the per-step counts of both tools, and p50, p99,
// mean and max within 1 % (pandas interpolates between samples; analyze
// reports the nearest rank from a 3-digit histogram).
func crossCheck(w io.Writer, summary string, py []byte) error {
	res, err := results.ReadSummary(summary)
	if err != nil {
		return err
	}
	var theirs map[string]map[string]float64
	if err := json.Unmarshal(py, &theirs); err != nil {
		return fmt.Errorf("pandas output: %w", err)
	}
	bad := 0
	for _, s := range res.Steps {
		p, ok := theirs[s.Step]
		if !ok {
			fmt.Fprintf(w, "cross-check: step %s missing in pandas output\n", s.Step)
			bad++
			continue
		}
		for k, v := range map[string]int64{"sent": s.Sent, "expected": s.Expected, "received": s.Received, "lost": s.Lost, "orphans": s.Orphans} {
			if float64(v) != p[k] {
				fmt.Fprintf(w, "cross-check: step %s %s: analyze %v, pandas %v\n", s.Step, k, v, p[k])
				bad++
			}
		}
		for k, a := range map[string]float64{"p50_ms": s.Latency.P50, "p99_ms": s.Latency.P99, "mean_ms": s.Latency.Mean, "max_ms": s.Latency.Max} {
			if q := p[k]; math.Abs(a-q) > 0.01*q+0.002 {
				fmt.Fprintf(w, "cross-check: step %s %s: analyze %v, pandas %v\n", s.Step, k, a, q)
				bad++
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("cross-check: %d differences", bad)
	}
	fmt.Fprintf(w, "cross-check: %d steps, same counts, p50/p99/mean/max within 1%%\n", len(res.Steps))
	return nil
}

// median returns the median of v.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ParseSize reads a size such as 100MB or 1GB (decimal units).
func ParseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
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
		return 0, fmt.Errorf("invalid size %q (want e.g. 100MB or 1GB)", s)
	}
	return int64(v * float64(mult)), nil
}

// SizeString writes n bytes the way ParseSize reads them.
func SizeString(n int64) string {
	switch {
	case n >= 1e9 && n%1e8 == 0:
		return strconv.FormatFloat(float64(n)/1e9, 'f', -1, 64) + "gb"
	case n >= 1e6:
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "mb"
	}
	return strconv.FormatInt(n, 10)
}
