package analyze

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/scalechat/scalechat/internal/results"
)

// Input is one CSV file to read.
type Input struct {
	Path string
	// Old marks the older headerless five-column format; Step and RoomSize
	// then come from the --steps file.
	Old      bool
	Step     string
	Rooms    int
	RoomSize int
}

// ReadSteps reads a --steps file: one "rooms,room_size,path" line per step
// of the older headerless format, in step order. Relative paths are relative
// to the steps file. Blank lines and lines starting with # are skipped.
func ReadSteps(path string) ([]Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read steps file: %w", err)
	}
	defer f.Close()
	var out []Input
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		parts := strings.SplitN(s, ",", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s:%d: want rooms,room_size,path", path, line)
		}
		rooms, err1 := strconv.Atoi(strings.TrimSpace(parts[0]))
		size, err2 := strconv.Atoi(strings.TrimSpace(parts[1]))
		if err1 != nil || err2 != nil || rooms <= 0 || size <= 0 {
			return nil, fmt.Errorf("%s:%d: rooms and room_size must be positive integers", path, line)
		}
		p := strings.TrimSpace(parts[2])
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		name := fmt.Sprintf("%dx%d", rooms, size)
		for _, in := range out {
			if in.Step == name {
				name = fmt.Sprintf("%s#%d", name, len(out)+1)
				break
			}
		}
		out = append(out, Input{Path: p, Old: true, Step: name, Rooms: rooms, RoomSize: size})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read steps file: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("steps file %s names no file", path)
	}
	return out, nil
}

// chunk is a line-aligned piece of one input file.
type chunk struct {
	file      int
	data      []byte // whole lines, each ending with '\n'
	buf       *[]byte
	startLine int64 // line number of data's first line
	lastT     int64 // unix_us of the last parsable line, or math.MinInt64
}

const chunkSize = 1 << 20

// fileReader streams one input as chunks. It owns its goroutine's file and
// gzip reader; run closes out when done.
type fileReader struct {
	idx  int
	in   Input
	pool *bufPool
	out  chan chunk

	// results, read after out is closed
	err       error
	bytes     int64 // uncompressed bytes read
	truncated bool  // the last line had no '\n' and was skipped
	lines     int64
}

// bufPool hands out chunk buffers, at most n at a time, which bounds the
// memory of a run whatever the size of its files.
type bufPool struct {
	free chan *[]byte
	sem  chan struct{}
}

func newBufPool(n int) *bufPool {
	return &bufPool{free: make(chan *[]byte, n), sem: make(chan struct{}, n)}
}

// get blocks until a buffer may be used.
func (p *bufPool) get(ctx context.Context) (*[]byte, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case b := <-p.free:
		return b, nil
	default:
		b := make([]byte, 0, chunkSize+64*1024)
		return &b, nil
	}
}

func (p *bufPool) put(b *[]byte) {
	p.free <- b
	<-p.sem
}

// errNeedSteps and errBadHeader make unreadable inputs.
var (
	errNeedSteps = errors.New("has no header: the older headerless format needs --steps")
	errBadHeader = errors.New("has an unknown header (want " + results.EventsHeader + ")")
)

func openInput(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 256*1024)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return struct {
			io.Reader
			io.Closer
		}{zr, f}, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{br, f}, nil
}

func (r *fileReader) run(ctx context.Context) {
	defer close(r.out)
	r.err = r.read(ctx)
}

func (r *fileReader) read(ctx context.Context) error {
	rc, err := openInput(r.in.Path)
	if err != nil {
		return err
	}
	defer rc.Close()

	line := int64(1)
	var carry []byte // partial last line of the previous read
	first := true
	lastT := int64(math.MinInt64)
	var row Row
	for {
		bp, err := r.pool.get(ctx)
		if err != nil {
			return err
		}
		buf := append((*bp)[:0], carry...)
		n, rerr := fill(rc, buf[len(buf):chunkSize])
		buf = buf[:len(buf)+n]
		r.bytes += int64(n)
		// io.ErrUnexpectedEOF comes from a gzip stream cut short: a
		// truncated file, tolerated like a partial last line.
		eof := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		if rerr != nil && !eof {
			r.pool.put(bp)
			return rerr
		}
		if first && len(buf) > 0 {
			first = false
			nl := bytes.IndexByte(buf, '\n')
			if nl < 0 && !eof {
				r.pool.put(bp)
				return fmt.Errorf("first line is longer than %d bytes", chunkSize)
			}
			head := buf
			if nl >= 0 {
				head = buf[:nl]
			}
			head = bytes.TrimSuffix(head, []byte{'\r'})
			switch {
			case string(head) == results.EventsHeader:
				if r.in.Old {
					r.in.Old = false // the steps file named a new-format file: read it as such
				}
				buf = buf[nl+1:]
				line = 2
			case r.in.Old:
			case bytes.HasPrefix(head, []byte("step,")):
				r.pool.put(bp)
				return errBadHeader
			default:
				r.pool.put(bp)
				return errNeedSteps
			}
		}
		end := bytes.LastIndexByte(buf, '\n') + 1
		if end == 0 && !eof && len(buf) >= chunkSize {
			r.pool.put(bp)
			return fmt.Errorf("line %d is longer than %d bytes", line, chunkSize)
		}
		carry = append(carry[:0], buf[end:]...)
		data := buf[:end]
		if len(data) > 0 {
			if t, ok := lastTime(data, r.in.Old, &row); ok {
				lastT = max(lastT, t)
			}
			nlines := int64(bytes.Count(data, []byte{'\n'}))
			c := chunk{file: r.idx, data: data, buf: bp, startLine: line, lastT: lastT}
			line += nlines
			r.lines += nlines
			select {
			case r.out <- c:
			case <-ctx.Done():
				r.pool.put(bp)
				return ctx.Err()
			}
		} else {
			r.pool.put(bp)
		}
		if eof {
			if len(bytes.TrimSpace(carry)) > 0 {
				r.truncated = true
			}
			if rerr == io.ErrUnexpectedEOF {
				r.truncated = true
			}
			return nil
		}
	}
}

// fill reads until b is full or the reader fails, returning the reader's
// own error (unlike io.ReadFull, which turns a short read into
// io.ErrUnexpectedEOF).
func fill(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// lastTime returns unix_us of the last parsable line of data, looking at
// the last few lines only.
func lastTime(data []byte, old bool, row *Row) (int64, bool) {
	end := len(data) - 1 // the final '\n'
	for tries := 0; tries < 8 && end > 0; tries++ {
		start := bytes.LastIndexByte(data[:end], '\n') + 1
		var err error
		if old {
			err = ParseOldRow(data[start:end], row)
		} else {
			err = ParseRow(data[start:end], row)
		}
		if err == nil {
			return row.UnixUS, true
		}
		end = start - 1
	}
	return 0, false
}
