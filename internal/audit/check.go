package audit

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Result is what the audit found.
type Result struct {
	Started time.Time `json:"started_at"`
	Ended   time.Time `json:"ended_at"`
	Clients int       `json:"clients"`
	Rooms   int       `json:"rooms"`

	Sent      int64 `json:"sent"`      // messages written by the clients
	Expected  int64 `json:"expected"`  // deliveries owed: every seq of a client's room after it first joined
	Delivered int64 `json:"delivered"` // distinct deliveries that arrived

	Missing    int64 `json:"missing"`    // owed, never arrived, never flagged
	Flagged    int64 `json:"flagged"`    // owed, never arrived, announced by a history_gap
	Duplicates int64 `json:"duplicates"` // a seq received again
	Reordered  int64 `json:"reordered"`  // a seq below the previous one on the same connection
	Foreign    int64 `json:"foreign"`    // chat frames of a room the client is not in
	Conflicts  int64 `json:"conflicts"`  // one message delivered under two seqs (two orders)
	// LostSends are messages written on a connection that stayed up and
	// never delivered to anyone; UnconfirmedSends were written within a
	// second before their connection ended (they may never have reached
	// the server).
	LostSends        int64 `json:"lost_sends"`
	UnconfirmedSends int64 `json:"unconfirmed_sends"`
	SendErrors       int64 `json:"send_errors"`
	NewStreams       int64 `json:"new_streams"` // a room that started anew under a client (another epoch)

	Faults []Fault `json:"faults"`

	Guarantees []Guarantee `json:"guarantees"`
	Broken     bool        `json:"broken"` // a guarantee failed
	FirstError string      `json:"first_error,omitempty"`
}

// Guarantee is one stated delivery guarantee and whether the run kept it.
type Guarantee struct {
	Name string `json:"name"`
	Held bool   `json:"held"`
	What string `json:"what"` // the figures behind the verdict
}

// check computes the result once every client has stopped.
func (a *auditor) check() *Result {
	res := &Result{Clients: len(a.clients), Rooms: a.cfg.Rooms, Conflicts: a.conflicts, FirstError: a.firstErr}
	// The last seq of each stream of each room, as far as anyone saw.
	last := map[string]uint64{}
	for _, c := range a.clients {
		for ep, s := range c.streams {
			for seq := range s.got {
				k := c.room + "\x00" + ep
				last[k] = max(last[k], seq)
			}
		}
	}
	for _, c := range a.clients {
		res.Reordered += c.reordered
		res.Foreign += c.foreign
		res.SendErrors += c.sendErrs
		res.NewStreams += int64(max(len(c.order)-1, 0))
		for _, ep := range c.order {
			s := c.streams[ep]
			top := last[c.room+"\x00"+ep]
			for seq := s.first + 1; seq <= top; seq++ {
				res.Expected++
				n := s.got[seq]
				switch {
				case n > 0:
					res.Delivered++
					res.Duplicates += int64(n - 1)
				case inGap(s.gaps, seq):
					res.Flagged++
				default:
					res.Missing++
				}
			}
			for seq, n := range s.got {
				if seq <= s.first && n > 1 {
					res.Duplicates += int64(n - 1) // history replayed twice
				}
			}
		}
		for n, at := range c.sent {
			res.Sent++
			if _, ok := a.delivered[msgKey{c.id, n}]; ok {
				continue
			}
			if endedSoonAfter(c.ended, at) {
				res.UnconfirmedSends++
			} else {
				res.LostSends++
			}
		}
	}
	res.Faults = a.sortedFaults()
	recovered := 0
	for _, f := range res.Faults {
		if f.RecoveredOK {
			recovered++
		}
	}
	res.Guarantees = []Guarantee{
		{"no loss: every message of a room reaches every member, or the member is told (history_gap)",
			res.Missing == 0 && res.LostSends == 0,
			fmt.Sprintf("%d of %d owed deliveries missing without a gap, %d flagged by a gap; %d sends lost, %d unconfirmed (connection ended within 1 s)",
				res.Missing, res.Expected, res.Flagged, res.LostSends, res.UnconfirmedSends)},
		{"no duplicates: a member receives each message once, resumes included", res.Duplicates == 0,
			fmt.Sprintf("%d duplicate deliveries", res.Duplicates)},
		{"order: one order per room, seen by every member in seq order", res.Reordered == 0 && res.Conflicts == 0,
			fmt.Sprintf("%d out-of-order deliveries, %d messages with two seqs", res.Reordered, res.Conflicts)},
		{"isolation: a member receives only its rooms' messages", res.Foreign == 0, fmt.Sprintf("%d foreign deliveries", res.Foreign)},
		{"recovery: after every fault, every client is back in its room", recovered == len(res.Faults),
			fmt.Sprintf("%d of %d faults recovered from", recovered, len(res.Faults))},
	}
	for _, g := range res.Guarantees {
		res.Broken = res.Broken || !g.Held
	}
	return res
}

func inGap(gaps [][2]uint64, seq uint64) bool {
	return slices.ContainsFunc(gaps, func(g [2]uint64) bool { return seq >= g[0] && seq <= g[1] })
}

// endedSoonAfter reports whether a connection ended within a second after
// at: a message written then may never have reached the server, and the
// protocol has no acknowledgement to tell.
func endedSoonAfter(ends []time.Time, at time.Time) bool {
	return slices.ContainsFunc(ends, func(t time.Time) bool { return !t.Before(at) && t.Sub(at) <= time.Second })
}

// WriteSummary prints the verdict.
func (r *Result) WriteSummary(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "audit: %d clients in %d rooms, %d messages sent, %d deliveries owed, %d delivered\n",
		r.Clients, r.Rooms, r.Sent, r.Expected, r.Delivered)
	if n := len(r.Faults); n > 0 {
		var rec []time.Duration
		for _, f := range r.Faults {
			if f.RecoveredOK {
				rec = append(rec, f.Recovered)
			}
		}
		slices.Sort(rec)
		kinds := map[string]int{}
		var order []string
		for _, f := range r.Faults {
			if kinds[f.Kind] == 0 {
				order = append(order, f.Kind)
			}
			kinds[f.Kind]++
		}
		var parts []string
		for _, k := range order {
			parts = append(parts, fmt.Sprintf("%d × %s", kinds[k], k))
		}
		fmt.Fprintf(&b, "faults: %d (%s)", n, strings.Join(parts, ", "))
		if len(rec) > 0 {
			fmt.Fprintf(&b, "; back in the room after %s median, %s at most", rec[len(rec)/2].Round(time.Millisecond), rec[len(rec)-1].Round(time.Millisecond))
		}
		b.WriteString("\n")
	}
	for _, g := range r.Guarantees {
		v := "held  "
		if !g.Held {
			v = "BROKEN"
		}
		fmt.Fprintf(&b, "  %s %s: %s\n", v, g.Name, g.What)
	}
	if r.NewStreams > 0 {
		fmt.Fprintf(&b, "note: %d times a room started anew under a client (new epoch)\n", r.NewStreams)
	}
	verdict := "every guarantee held"
	if r.Broken {
		verdict = "a guarantee was BROKEN"
	}
	fmt.Fprintf(&b, "verdict: %s\n", verdict)
	_, err := io.WriteString(w, b.String())
	return err
}
