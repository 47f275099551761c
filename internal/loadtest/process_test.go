//go:build linux

package loadtest

import (
	"bufio"
	"errors"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// scalechatBinary builds cmd/scalechat once for the tests that run it as a
// real process (signals, workers).
func scalechatBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "scalechat-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "scalechat")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/scalechat/scalechat/cmd/scalechat").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	stdout strings.Builder
}

func startLoadtest(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(scalechatBinary(t), append([]string{"loadtest"}, args...)...)
	p := &proc{cmd: cmd, lines: make(chan string, 1024)}
	cmd.Stdout = &p.stdout
	se, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(se)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

// waitLine reads stderr until a line contains s, logging everything.
func (p *proc) waitLine(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("stderr ended before %q", s)
			}
			t.Log(l)
			if strings.Contains(l, s) {
				return
			}
		case <-timeout:
			t.Fatalf("no line with %q within 30 s", s)
		}
	}
}

// wait waits for the process and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	for l := range p.lines {
		t.Log(l)
	}
	err := p.cmd.Wait()
	t.Log(p.stdout.String())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestWorkersMerge(t *testing.T) {
	srv := startFakeServer(t, nil)
	out := filepath.Join(t.TempDir(), "run.csv")
	p := startLoadtest(t, "--url", srv.URL, "--rooms", "6", "--room-size", "5", "--workers", "3", "--msg-frequency", "100ms",
		"--duration", "1s", "--drain", "3s", "--ramp", "3000", "--out", out)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	meta := readMeta(t, out)
	if strings.Join(meta.Parts, ",") != "run.w0.csv,run.w1.csv,run.w2.csv" {
		t.Fatalf("parts %v", meta.Parts)
	}
	s := meta.Steps[0]
	if s.Sent != 300 || s.Expected != 1500 || s.Received != 1500 || s.Joined != 30 || s.LocalClients != 30 {
		t.Fatalf("merged step %+v", s)
	}
	var rows []csvRow
	perPart := map[string]int{}
	for _, part := range meta.Parts {
		r := readCSV(t, filepath.Join(filepath.Dir(out), part))
		perPart[part] = len(r)
		rows = append(rows, r...)
	}
	for part, n := range perPart {
		if n == 0 {
			t.Errorf("part %s is empty", part)
		}
	}
	checkCSVAgainstMeta(t, rows, meta)
	if !strings.Contains(p.stdout.String(), "100.000%") {
		t.Errorf("summary lacks the delivery ratio:\n%s", p.stdout.String())
	}
}

func TestInterruptLeavesValidCSV(t *testing.T) {
	srv := startFakeServer(t, nil)
	for _, tt := range []struct {
		name    string
		workers string
		signals int
	}{
		{"graceful", "1", 1},
		{"immediate", "1", 2},
		{"graceful with workers", "2", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run.csv")
			// 10,000 deliveries/s: enough to be mid-flight at the signal, few
			// enough for the in-process server (under -race, on a loaded
			// machine) to keep up, so that a graceful stop can lose nothing.
			p := startLoadtest(t, "--url", srv.URL, "--rooms", "10", "--room-size", "10", "--msg-frequency", "100ms",
				"--duration", "60s", "--drain", "5s", "--workers", tt.workers, "--out", out)
			p.waitLine(t, " sending ")
			start := time.Now()
			for range tt.signals {
				if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond) // two distinct Ctrl+C presses
			}
			code := p.wait(t)
			if code == 0 {
				t.Errorf("exit code 0 after Ctrl+C")
			}
			if time.Since(start) > 15*time.Second {
				t.Errorf("took %v to stop", time.Since(start))
			}
			meta := readMeta(t, out)
			var rows []csvRow
			for _, part := range meta.Parts {
				rows = append(rows, readCSV(t, filepath.Join(filepath.Dir(out), part))...)
			}
			if len(rows) == 0 {
				t.Fatal("no rows")
			}
			if tt.signals == 1 {
				if code != 130 {
					t.Errorf("exit code %d, want 130", code)
				}
				if len(meta.Steps) != 1 || !meta.Steps[0].Interrupted || meta.Steps[0].Sent == 0 {
					t.Fatalf("meta steps %+v", meta.Steps)
				}
				// A graceful stop still drains: nothing is lost.
				checkCSVAgainstMeta(t, rows, meta)
				if s := meta.Steps[0]; s.Received != s.Expected {
					t.Errorf("graceful stop lost messages: %+v", s)
				}
			}
		})
	}
}

func TestCLIRefusesImpossiblePlan(t *testing.T) {
	p := startLoadtest(t, "--rooms", "50000", "--room-size", "1", "--dry-run")
	var all []string
	for l := range p.lines {
		all = append(all, l)
	}
	code := p.wait(t)
	text := strings.Join(all, "\n")
	if code != 2 || !strings.Contains(text, "open-file limit") || !strings.Contains(text, "machine:") {
		t.Fatalf("exit %d, stderr:\n%s", code, text)
	}
}
