//go:build linux

package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// The parent and its workers talk in JSON lines: the parent writes the
// Config as the first line of the worker's stdin, then "go" messages; the
// worker writes progress, ready and step messages to its stdout. Workers run
// in their own process group so that a terminal's Ctrl+C reaches only the
// parent, which forwards it.

type workerMsg struct {
	Type     string    `json:"type"` // progress, ready, step, done
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	Step     int       `json:"step"`
	Joined   []int64   `json:"joined,omitempty"`
	Result   *PartStep `json:"result,omitempty"`
}

type parentMsg struct {
	Type   string  `json:"type"` // go
	Step   int     `json:"step"`
	T0     int64   `json:"t0"`
	Global []int64 `json:"global"`
}

// RunWorker is the hidden worker mode: it reads its Config from stdin, runs
// its part and reports to the parent on stdout.
func RunWorker(ctx, hard context.Context, stdin io.Reader, stdout io.Writer) error {
	br := bufio.NewReaderSize(stdin, 1<<20)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("worker: read configuration: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(line, &cfg); err != nil {
		return fmt.Errorf("worker: bad configuration: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	InspectMachine() // raises the open-file limit
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &pipeCoord{enc: json.NewEncoder(stdout), goes: make(chan parentMsg, 4)}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(c.goes)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				var m parentMsg
				if json.Unmarshal(line, &m) == nil {
					c.goes <- m
				}
			}
			if err != nil {
				cancel() // the parent is gone: stop gracefully
				return
			}
		}
	}()
	err = runPart(ctx, hard, &cfg, c, cfg.Out)
	c.send(workerMsg{Type: "done"})
	// The parent closes our stdin once it has read "done".
	select {
	case <-readDone:
	case <-time.After(5 * time.Second):
	}
	return err
}

// pipeCoord is a worker's side of the coordination.
type pipeCoord struct {
	mu   sync.Mutex
	enc  *json.Encoder
	goes chan parentMsg
}

func (c *pipeCoord) send(m workerMsg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.enc.Encode(m) // a gone parent shows as EOF on stdin
}

func (c *pipeCoord) ready(ctx context.Context, k int, joined []int64) (int64, []int64, error) {
	c.send(workerMsg{Type: "ready", Step: k, Joined: joined})
	for {
		select {
		case m, ok := <-c.goes:
			if !ok {
				return 0, nil, errors.New("the parent process is gone")
			}
			if m.Type == "go" && m.Step == k {
				return m.T0, m.Global, nil
			}
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

func (c *pipeCoord) progress(s Snapshot) { c.send(workerMsg{Type: "progress", Snapshot: &s}) }

func (c *pipeCoord) stepDone(r PartStep) { c.send(workerMsg{Type: "step", Step: r.Index, Result: &r}) }

// worker is the parent's handle on one child process.
type worker struct {
	i     int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	part  string
	alive bool
	last  Snapshot
	seen  bool
}

type fromWorker struct {
	i   int
	msg workerMsg
	eof bool
}

// workerSet is the parent's view of its worker processes.
type workerSet struct {
	ws       []*worker
	msgs     chan fromWorker
	readers  sync.WaitGroup
	barriers map[int]*barrier // per step: the workers whose clients have all joined
}

// barrier gathers the workers ready to send a step, and their joined
// counts per room.
type barrier struct {
	n      int
	joined []int64
	from   map[int]bool
}

// runWorkers starts cfg.Workers children, coordinates their steps and
// merges their progress and results.
func runWorkers(ctx, hard context.Context, cfg *Config, opt Options, parts []string, agg *aggregator, m *merger) error {
	exe := opt.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("find own executable to start workers: %w", err)
		}
	}
	s := &workerSet{ws: make([]*worker, cfg.Workers), msgs: make(chan fromWorker, 64), barriers: map[int]*barrier{}}
	defer s.stop()
	for i := range s.ws {
		if err := s.start(i, exe, cfg, opt, parts[i]); err != nil {
			return err
		}
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	ctxDone, hardDone := ctx.Done(), hard.Done()
	var failures []error
	alive := len(s.ws)
	for alive > 0 {
		select {
		case <-ctxDone:
			ctxDone = nil
			s.signalAll()
		case <-hardDone:
			hardDone = nil
			s.signalAll() // a second interrupt: the workers stop at once
		case <-tick.C:
			var snaps []Snapshot
			for _, w := range s.ws {
				if w.alive && w.seen {
					snaps = append(snaps, w.last)
				}
			}
			agg.update(snaps)
		case f := <-s.msgs:
			w := s.ws[f.i]
			switch {
			case f.eof:
				err := w.cmd.Wait()
				w.alive = false
				alive--
				_ = w.stdin.Close()
				if err != nil {
					failures = append(failures, fmt.Errorf("worker %d: %w", w.i, err))
					// Whatever killed it, its part ends with a whole row.
					_ = TruncateToLastRow(w.part)
					if ctxDone != nil {
						ctxDone = nil
						s.signalAll() // the run is broken: stop the others gracefully
					}
				}
				m.partGone(w.i)
				for k := range s.barriers {
					s.release(k)
				}
			case f.msg.Type == "progress" && f.msg.Snapshot != nil:
				w.last, w.seen = *f.msg.Snapshot, true
			case f.msg.Type == "ready":
				s.ready(w.i, f.msg)
			case f.msg.Type == "step" && f.msg.Result != nil:
				m.add(w.i, *f.msg.Result)
			case f.msg.Type == "done":
				_ = w.stdin.Close()
			}
		}
	}
	return errors.Join(failures...)
}

// start starts worker i writing part, sends it its configuration and reads
// its messages into s.msgs.
func (s *workerSet) start(i int, exe string, cfg *Config, opt Options, part string) error {
	wcfg := *cfg
	wcfg.Worker = i
	wcfg.Out = part
	b, err := json.Marshal(wcfg)
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, opt.WorkerArgs...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = opt.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker %d: %w", i, err)
	}
	s.ws[i] = &worker{i: i, cmd: cmd, stdin: stdin, part: part, alive: true}
	if _, err := stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("configure worker %d: %w", i, err)
	}
	s.readers.Go(func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var m workerMsg
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				s.msgs <- fromWorker{i: i, msg: m}
			}
		}
		s.msgs <- fromWorker{i: i, eof: true}
	})
	return nil
}

// stop ends what start began. Normally every worker has exited here; after
// a setup error, it stops the ones started and drains their readers.
func (s *workerSet) stop() {
	go func() {
		s.readers.Wait()
		close(s.msgs)
	}()
	for _, w := range s.ws {
		if w != nil && w.alive {
			_ = w.cmd.Process.Kill()
		}
	}
	for range s.msgs {
	}
	for _, w := range s.ws {
		if w != nil && w.alive {
			_ = w.cmd.Wait()
		}
	}
}

// signalAll asks every live worker to stop gracefully.
func (s *workerSet) signalAll() {
	for _, w := range s.ws {
		if w.alive {
			_ = w.cmd.Process.Signal(os.Interrupt)
		}
	}
}

// ready records that worker i's clients of a step have all joined.
func (s *workerSet) ready(i int, msg workerMsg) {
	b := s.barriers[msg.Step]
	if b == nil {
		b = &barrier{from: map[int]bool{}}
		s.barriers[msg.Step] = b
	}
	if len(b.joined) < len(msg.Joined) {
		b.joined = append(b.joined, make([]int64, len(msg.Joined)-len(b.joined))...)
	}
	for r, n := range msg.Joined {
		b.joined[r] += n
	}
	b.n++
	b.from[i] = true
	s.release(msg.Step)
}

// release starts step k on every worker once all live ones are ready: the
// same start instant for all, and the joined counts of the whole run.
func (s *workerSet) release(k int) {
	b := s.barriers[k]
	alive := 0
	for _, w := range s.ws {
		if w.alive {
			alive++
		}
	}
	if b == nil || b.n < alive || b.n == 0 {
		return
	}
	line, _ := json.Marshal(parentMsg{Type: "go", Step: k, T0: time.Now().Add(50 * time.Millisecond).UnixMicro(), Global: b.joined})
	for _, w := range s.ws {
		if w.alive && b.from[w.i] {
			_, _ = w.stdin.Write(append(line, '\n'))
		}
	}
	delete(s.barriers, k)
}
