package loadtest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// CSVHeader is the first line of every events file (docs/csv.md).
const CSVHeader = "step,room,message_id,sender_id,client_id,event,unix_us,lag_us\n"

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
	if err := r.write([]byte(CSVHeader)); err != nil {
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

// Row events.
const (
	evJoined   = "Joined"
	evSent     = "Sent"
	evReceived = "Received"
)

// appendRow appends one CSV row. msg false leaves message_id and sender_id
// empty (Joined rows); lag < 0 leaves lag_us empty.
func appendRow(b []byte, step, roomPre string, room int, msg bool, messageID, senderID, clientID uint64, event string, unixUs, lag int64) []byte {
	b = append(b, step...)
	b = append(b, ',')
	b = append(b, roomPre...)
	b = strconv.AppendInt(b, int64(room), 10)
	b = append(b, ',')
	if msg {
		b = strconv.AppendUint(b, messageID, 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, senderID, 10)
	} else {
		b = append(b, ',')
	}
	b = append(b, ',')
	b = strconv.AppendUint(b, clientID, 10)
	b = append(b, ',')
	b = append(b, event...)
	b = append(b, ',')
	b = strconv.AppendInt(b, unixUs, 10)
	b = append(b, ',')
	if lag >= 0 {
		b = strconv.AppendInt(b, lag, 10)
	}
	return append(b, '\n')
}

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
