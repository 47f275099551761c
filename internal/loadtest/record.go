//go:build linux

package loadtest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/scalechat/scalechat/internal/results"
)

// chunkSize is how many bytes of rows an event loop gathers before handing
// them to the writer.
const chunkSize = 256 << 10

// Recorder owns one CSV file. Event loops append whole rows to their own
// chunk and hand full chunks to Submit; one goroutine writes them, each with
// a single write(2), so the file only ever ends between rows (whatever stops
// the process, short of a kill in the middle of a write). With a ".gz"
// path, every chunk becomes one gzip member: the members concatenate into
// one valid gzip stream and each holds whole rows.
type Recorder struct {
	f       *os.File
	gz      *gzip.Writer
	zbuf    bytes.Buffer
	ch      chan []byte
	free    sync.Pool
	done    chan struct{}
	err     error // set by the writer goroutine, read after done
	discard bool
	bytes   int64
}

// CreateRecorder creates path (and its folder) and writes the header. An
// empty path records nothing (for benchmarks of the generator itself).
func CreateRecorder(path string) (*Recorder, error) {
	r := &Recorder{ch: make(chan []byte, 64), done: make(chan struct{})}
	r.free.New = func() any { b := make([]byte, 0, chunkSize+4096); return &b }
	if path == "" {
		r.discard = true
		go r.writeLoop()
		return r, nil
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create results folder: %w", err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create results file: %w", err)
	}
	r.f = f
	if strings.HasSuffix(path, ".gz") {
		r.gz, _ = gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	}
	if err := r.write([]byte(results.EventsHeader + "\n")); err != nil {
		f.Close()
		return nil, err
	}
	go r.writeLoop()
	return r, nil
}

// Buffer returns an empty chunk to append rows to.
func (r *Recorder) Buffer() []byte { return (*(r.free.Get().(*[]byte)))[:0] }

// Submit hands a chunk of whole rows to the writer. It blocks when the
// writer is behind, which slows the event loop down instead of growing
// memory without bound (and shows up as send lag).
func (r *Recorder) Submit(b []byte) {
	if len(b) == 0 {
		r.release(b)
		return
	}
	r.ch <- b
}

func (r *Recorder) release(b []byte) {
	if cap(b) > 4*chunkSize {
		return // an unusually large chunk: let it go
	}
	b = b[:0]
	r.free.Put(&b)
}

func (r *Recorder) writeLoop() {
	defer close(r.done)
	for b := range r.ch {
		if r.err == nil && !r.discard {
			r.err = r.write(b)
		}
		r.bytes += int64(len(b))
		r.release(b)
	}
}

func (r *Recorder) write(b []byte) error {
	if r.gz != nil {
		r.zbuf.Reset()
		r.gz.Reset(&r.zbuf)
		if _, err := r.gz.Write(b); err != nil {
			return fmt.Errorf("compress results: %w", err)
		}
		if err := r.gz.Close(); err != nil {
			return fmt.Errorf("compress results: %w", err)
		}
		b = r.zbuf.Bytes()
	}
	if _, err := r.f.Write(b); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// Close waits for every submitted chunk to be written and closes the file.
// No Submit may follow.
func (r *Recorder) Close() error {
	close(r.ch)
	<-r.done
	if r.f == nil {
		return r.err
	}
	return errors.Join(r.err, r.f.Close())
}

// Bytes returns how many bytes of rows were submitted (before compression).
// Valid after Close.
func (r *Recorder) Bytes() int64 { return r.bytes }

// TruncateToLastRow cuts an uncompressed CSV file after its last newline,
// so a part whose writer was killed mid-write ends with a whole row.
// Compressed files are left alone.
func TruncateToLastRow(path string) error {
	if strings.HasSuffix(path, ".gz") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			if start+int64(i)+1 == size {
				return nil
			}
			return f.Truncate(start + int64(i) + 1)
		}
		end = start
	}
	return f.Truncate(0)
}
