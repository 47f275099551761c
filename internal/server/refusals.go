//go:build linux

package server

import (
	"log/slog"
	"sync"
	"time"
)

// refusalLinesPerSecond bounds the log lines of each refusal reason: a
// flood of refused upgrades (a client retrying in a loop, a load test
// beyond --max-connections) costs at most this many lines a second per
// reason, and the count of the others.
const refusalLinesPerSecond = 5

// refusalLog logs refused connection attempts at info, so that whoever
// runs the server sees why a client was refused (the client itself often
// sees only a status code, or "error_unknown" in Tsung). Each reason gets
// refusalLinesPerSecond lines per second; the refusals held back are
// counted and reported as suppressed on the next line of that reason, or
// by flush once the second is over.
type refusalLog struct {
	log   *slog.Logger
	limit int

	mu      sync.Mutex
	reasons [refuseReasons]refusalWindow
}

// refusalWindow is one reason's current second.
type refusalWindow struct {
	start      time.Time
	logged     int // lines in this second
	suppressed int // refusals not logged since the last line
}

func newRefusalLog(log *slog.Logger, limit int) *refusalLog {
	return &refusalLog{log: log, limit: limit}
}

// refused logs one refusal unless its reason already had its lines this
// second. remote is the client's address; msg is what the client was told.
func (l *refusalLog) refused(now time.Time, reason RefuseReason, status int, remote, path, msg string) {
	l.mu.Lock()
	w := &l.reasons[reason]
	if now.Sub(w.start) >= time.Second {
		w.start, w.logged = now, 0
	}
	if w.logged >= l.limit {
		w.suppressed++
		l.mu.Unlock()
		return
	}
	w.logged++
	suppressed := w.suppressed
	w.suppressed = 0
	l.mu.Unlock()
	attrs := []any{"reason", reason.String(), "status", status, "remote", remote, "path", path, "answer", msg}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.log.Info("connection refused", attrs...)
}

// flush reports the refusals held back by reasons whose second is over
// and that had no line since, so that the end of a flood is not silent.
func (l *refusalLog) flush(now time.Time) {
	type held struct {
		reason RefuseReason
		n      int
	}
	var out []held
	l.mu.Lock()
	for r := range l.reasons {
		w := &l.reasons[r]
		if w.suppressed > 0 && now.Sub(w.start) >= time.Second {
			out = append(out, held{RefuseReason(r), w.suppressed})
			w.suppressed = 0
		}
	}
	l.mu.Unlock()
	for _, h := range out {
		l.log.Info("connection refusals not logged one by one", "reason", h.reason.String(), "suppressed", h.n)
	}
}

// refusedConn counts a refused connection or request under reason and logs
// why (rate-limited). Every refusal goes through here, on the loops' path as
// on net/http's, so that none is in the metrics and missing from the log.
// remote is the client's address, path the request's path without its query
// ("" when no request was read), msg what the client was told.
func (s *Server) refusedConn(reason RefuseReason, status int, remote, path, msg string) {
	s.refused[reason].Add(1)
	s.refusals.refused(time.Now(), reason, status, remote, path, msg)
}
