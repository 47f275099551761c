package analyze

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// Options configure an analysis.
type Options struct {
	// Inputs are the CSV files, in any order; parts of one run are merged.
	Inputs []Input
	// Window is how long after its due time a message is held for its
	// deliveries at least; a Received row later than that may find it gone
	// and count as an orphan. It bounds memory for runs that lose messages
	// (complete messages are let go after about a second). Default 2 min.
	Window time.Duration
	// Interval is the time-series bucket. Default 1 s.
	Interval time.Duration
	// Workers is the number of parser goroutines and join partitions. Default
	// GOMAXPROCS.
	Workers int
	// MaxErrors is how many malformed rows are reported by position.
	// Default 10.
	MaxErrors int
	// TopRooms is how many hottest rooms are kept per step. Default 10.
	TopRooms int
	// Windows keeps, per step and Interval, what the messages due in it
	// were owed and got, with a histogram of their latencies
	// (Result.Windows), for scalechat diff.
	Windows bool
}

// settle is how long after a message's due time its room's Joined rows are
// assumed complete: rows of one process are written within about this much
// of their time order.
const settle = int64(time.Second / time.Microsecond)

// names interns step and step-room names into dense ids shared by all
// parser goroutines; each parser caches them so the lock is taken once per
// new name per parser.
type names struct {
	mu       sync.Mutex
	srs      map[string]srRef
	srList   []srName
	steps    map[string]uint32
	stepList []string
}

type srRef struct{ sr, step uint32 }

type srName struct {
	step uint32
	room string
}

func newNames() *names {
	return &names{srs: make(map[string]srRef), steps: make(map[string]uint32)}
}

// maxSteps bounds the distinct step names: real runs have tens; a file
// whose step column is garbage must not make a histogram per row.
const maxSteps = 1000

var errTooManySteps = fmt.Errorf("more than %d distinct steps", maxSteps)

func (n *names) step(name string) (uint32, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stepLocked(name)
}

func (n *names) stepLocked(name string) (uint32, error) {
	id, ok := n.steps[name]
	if !ok {
		if len(n.stepList) >= maxSteps {
			return 0, errTooManySteps
		}
		id = uint32(len(n.stepList))
		n.steps[name] = id
		n.stepList = append(n.stepList, name)
	}
	return id, nil
}

func (n *names) stepRoom(step, room string) (srRef, error) {
	key := step + "," + room
	n.mu.Lock()
	defer n.mu.Unlock()
	ref, ok := n.srs[key]
	if !ok {
		st, err := n.stepLocked(step)
		if err != nil {
			return srRef{}, err
		}
		ref = srRef{sr: uint32(len(n.srList)), step: st}
		n.srs[key] = ref
		n.srList = append(n.srList, srName{step: ref.step, room: room})
	}
	return ref, nil
}

// result is one parsed chunk.
type result struct {
	seq        int64
	wm         int64
	partitions []*[]event
	joins      []event
	rows       int64
	malformed  int64
	ignored    int64
	errs       []string
}

// parser parses chunks; it is owned by one goroutine.
type parser struct {
	names       *names
	inputs      []Input
	oldRef      []srRef // per input, for the older format
	npartitions int
	maxErrs     int
	srCache     map[string]srRef
	stCache     map[string]uint32
	lastStep    string
	lastID      uint32
	pool        *sync.Pool
}

func (w *parser) parse(c chunk, seq, wm int64) *result {
	res := &result{seq: seq, wm: wm, partitions: make([]*[]event, w.npartitions)}
	for i := range res.partitions {
		res.partitions[i] = w.pool.Get().(*[]event)
		*res.partitions[i] = (*res.partitions[i])[:0]
	}
	in := &w.inputs[c.file]
	data := c.data
	line := c.startLine - 1
	var row Row
	for len(data) > 0 {
		nl := indexNL(data)
		l := data[:nl]
		data = data[nl+1:]
		line++
		if len(l) == 0 || (len(l) == 1 && l[0] == '\r') {
			continue
		}
		var ev event
		var err error
		if in.Old {
			err = ParseOldRow(l, &row)
		} else {
			err = ParseRow(l, &row)
		}
		if err == nil {
			ev, err = w.event(c.file, &row)
		}
		if err != nil {
			if string(l) == results.EventsHeader { // files concatenated with their headers
				continue
			}
			if err == ErrIgnored {
				res.ignored++
				continue
			}
			res.malformed++
			if len(res.errs) < w.maxErrs {
				res.errs = append(res.errs, fmt.Sprintf("%s:%d: %v: %s", in.Path, line, err, excerpt(l)))
			}
			continue
		}
		res.rows++
		if ev.kind == results.Joined {
			res.joins = append(res.joins, ev)
			continue
		}
		s := 0
		if w.npartitions > 1 {
			s = int((hashKey(ev.sender, ev.msg) >> 32) % uint64(w.npartitions))
		}
		*res.partitions[s] = append(*res.partitions[s], ev)
	}
	return res
}

// event reduces a row to an event, naming its step (and room).
func (w *parser) event(file int, row *Row) (event, error) {
	ev := event{kind: row.Kind, t: row.UnixUS, sender: row.Sender, msg: row.Message, client: row.Client}
	switch {
	case w.inputs[file].Old:
		ev.sr, ev.step = w.oldRef[file].sr, w.oldRef[file].step
	case row.Kind == results.Received:
		// Only the step: the room of a delivery is its message's.
		if string(row.Step) != w.lastStep {
			id, ok := w.stCache[string(row.Step)]
			if !ok {
				var err error
				if id, err = w.names.step(string(row.Step)); err != nil {
					return ev, err
				}
				w.stCache[string(row.Step)] = id
			}
			w.lastStep, w.lastID = string(row.Step), id
		}
		ev.step = w.lastID
	default:
		ref, ok := w.srCache[string(row.StepRoom)]
		if !ok {
			var err error
			if ref, err = w.names.stepRoom(string(row.Step), string(row.Room)); err != nil {
				return ev, err
			}
			w.srCache[string(row.StepRoom)] = ref
		}
		ev.sr, ev.step = ref.sr, ref.step
	}
	return ev, nil
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return len(b)
}

func excerpt(l []byte) string {
	const n = 60
	if len(l) > n {
		return strconv.Quote(string(l[:n])) + "…"
	}
	return strconv.Quote(string(l))
}

// Run reads the inputs and computes the statistics. It fails only when an
// input cannot be read; bad rows are counted in the result.
//
// The pipeline: one reader per file cuts it into chunks at line ends; the
// merge hands chunks to the parsers in time order across files; parsers
// parse rows and split each chunk's events by message into per-partition
// batches; the batches go to the partitions in input order, where Sent and
// Received rows are joined.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if len(opts.Inputs) == 0 {
		return nil, fmt.Errorf("no input files")
	}
	opts.fillDefaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()

	nm := newNames()
	inputs := append([]Input(nil), opts.Inputs...)
	legacy, err := legacySteps(nm, inputs)
	if err != nil {
		return nil, err
	}
	nw := opts.Workers
	pool := newBufPool(2*len(inputs) + 2*nw + 2)
	evPool := &sync.Pool{New: func() any { b := make([]event, 0, 8192); return &b }}
	var wg sync.WaitGroup
	readers := make([]*fileReader, len(inputs))
	for i, in := range inputs {
		readers[i] = &fileReader{idx: i, in: in, pool: pool, out: make(chan chunk, 1)}
		wg.Go(func() { readers[i].run(ctx) })
	}
	jobs := make(chan job, nw)
	var mergeErr error
	wg.Go(func() {
		defer close(jobs)
		if mergeErr = merge(ctx, readers, jobs, pool); mergeErr != nil {
			cancel()
		}
	})
	results := startParsers(&wg, nw, jobs, pool, func() *parser {
		return &parser{names: nm, inputs: inputs, oldRef: legacy.ref, npartitions: nw, maxErrs: opts.MaxErrors,
			srCache: make(map[string]srRef), stCache: make(map[string]uint32), pool: evPool}
	})
	partitions, partitionIn, partitionWG := startPartitions(nw, opts, legacy, evPool)
	n, errs := inOrder(results, partitionIn, opts.MaxErrors)
	for _, ch := range partitionIn {
		close(ch)
	}
	partitionWG.Wait()
	wg.Wait()
	if mergeErr != nil {
		return nil, mergeErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	res := assemble(nm, partitions, opts)
	res.Rows, res.Malformed, res.Ignored, res.Errors = n.rows, n.malformed, n.ignored, errs
	for i, r := range readers {
		res.Bytes += r.bytes
		res.Inputs = append(res.Inputs, inputs[i].Path)
		if r.truncated {
			res.Truncated = append(res.Truncated, inputs[i].Path)
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// fillDefaults sets the options left zero.
func (o *Options) fillDefaults() {
	if o.Window <= 0 {
		o.Window = 2 * time.Minute
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = 10
	}
	if o.TopRooms <= 0 {
		o.TopRooms = 10
	}
}

// legacy describes the inputs in the older headerless format: each file is
// one step of one room, of the size given with it.
type legacy struct {
	ref   []srRef // per input: its step and room (inputs of the current format: zero)
	fixed []int64 // per step: the room size of a legacy step
	old   []bool  // per step: the step is in the older format
}

func legacySteps(nm *names, inputs []Input) (legacy, error) {
	l := legacy{ref: make([]srRef, len(inputs))}
	for i, in := range inputs {
		if !in.Old {
			continue
		}
		var err error
		if l.ref[i], err = nm.stepRoom(in.Step, ""); err != nil {
			return l, err
		}
		for int(l.ref[i].step) >= len(l.fixed) {
			l.fixed = append(l.fixed, 0)
			l.old = append(l.old, false)
		}
		l.fixed[l.ref[i].step] = int64(in.RoomSize)
		l.old[l.ref[i].step] = true
	}
	return l, nil
}

// job is a chunk for the parsers: its place in input order and the
// watermark (no later chunk holds an earlier row than wm, µs).
type job struct {
	c   chunk
	seq int64
	wm  int64
}

// merge hands the files' chunks to jobs in time order, chunk by chunk:
// always from the file that is least far in time.
func merge(ctx context.Context, readers []*fileReader, jobs chan<- job, pool *bufPool) error {
	lastT := make([]int64, len(readers))
	active := make([]bool, len(readers))
	for i := range lastT {
		lastT[i] = math.MinInt64
		active[i] = true
	}
	left := len(readers)
	seq := int64(0)
	for left > 0 {
		f := -1
		for i := range lastT {
			if active[i] && (f < 0 || lastT[i] < lastT[f]) {
				f = i
			}
		}
		var c chunk
		var ok bool
		select {
		case c, ok = <-readers[f].out:
		case <-ctx.Done():
			return nil
		}
		if !ok {
			active[f] = false
			left--
			if err := readers[f].err; err != nil {
				return fmt.Errorf("%s: %w", readers[f].in.Path, err)
			}
			continue
		}
		lastT[f] = max(lastT[f], c.lastT)
		wm := int64(math.MaxInt64 - 1)
		for i := range lastT {
			if active[i] {
				wm = min(wm, lastT[i])
			}
		}
		select {
		case jobs <- job{c, seq, wm}:
			seq++
		case <-ctx.Done():
			pool.put(c.buf)
			return nil
		}
	}
	return nil
}

// startParsers starts n parsers that parse the jobs; the returned channel
// closes when they are done.
func startParsers(wg *sync.WaitGroup, n int, jobs <-chan job, pool *bufPool, newParser func() *parser) <-chan *result {
	results := make(chan *result, n)
	var parsers sync.WaitGroup
	for range n {
		w := newParser()
		parsers.Go(func() {
			for j := range jobs {
				r := w.parse(j.c, j.seq, j.wm)
				pool.put(j.c.buf)
				results <- r
			}
		})
	}
	wg.Go(func() {
		parsers.Wait()
		close(results)
	})
	return results
}

// startPartitions starts n partitions, each fed by its channel.
func startPartitions(n int, opts Options, l legacy, evPool *sync.Pool) ([]*partition, []chan partitionJob, *sync.WaitGroup) {
	partitions := make([]*partition, n)
	in := make([]chan partitionJob, n)
	var wg sync.WaitGroup
	win := opts.Window.Microseconds()
	for i := range partitions {
		partitions[i] = newPartition(i, win, settle, opts.Interval.Microseconds())
		partitions[i].fixed, partitions[i].old = l.fixed, l.old
		if opts.Windows {
			partitions[i].wins = make(map[seriesKey]*winAcc)
		}
		in[i] = make(chan partitionJob, 4)
		wg.Go(func() {
			for j := range in[i] {
				partitions[i].apply(j)
				evPool.Put(j.events)
			}
			partitions[i].evict(math.MaxInt64)
		})
	}
	return partitions, in, &wg
}

// inOrder hands the parsers' results to the partitions in input order, and
// counts rows and the first maxErrors errors.
func inOrder(results <-chan *result, partitionIn []chan partitionJob, maxErrors int) (n rowCounts, errs []string) {
	waiting := make(map[int64]*result)
	next := int64(0)
	for r := range results {
		waiting[r.seq] = r
		for {
			r, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			next++
			n.rows += r.rows
			n.malformed += r.malformed
			n.ignored += r.ignored
			for _, e := range r.errs {
				if len(errs) < maxErrors {
					errs = append(errs, e)
				}
			}
			for i, ch := range partitionIn {
				ch <- partitionJob{events: r.partitions[i], joins: r.joins, wm: r.wm}
			}
		}
	}
	return n, errs
}

// rowCounts counts the rows of all inputs: parsed, malformed and ignored.
type rowCounts struct{ rows, malformed, ignored int64 }
