package audit

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/scalechat/scalechat/internal/results"
)

// check computes the result once every client has stopped.
func (a *auditor) check() *results.Audit {
	res := &results.Audit{Protocol: a.cfg.Protocol, Clients: len(a.clients), Rooms: a.cfg.Rooms, Conflicts: a.conflicts, FirstError: a.firstErr,
		SeqsTwoMessages: int64(len(a.twice)), SeqTwoExample: a.twiceExample, AfterReset: a.afterReset,
		ConflictExample: a.conflictExample, DuplicateExample: a.dupExample}
	res.Faults = a.sortedFaults()
	blame := func(c *client, t time.Time) *results.AuditCounts { return blameFor(res, c.name, t) }
	for _, c := range a.clients {
		for _, t := range c.reordered {
			blame(c, t).Reordered++
		}
		for _, t := range c.dups {
			blame(c, t).Duplicates++
		}
		for _, t := range a.again[c.id] {
			blame(c, t).Duplicates++
		}
		res.Foreign += c.foreign
		if res.FirstRefusal == "" {
			res.FirstRefusal = c.firstRefusal
		}
		res.SendErrors += c.sendErrs
		res.NewStreams += int64(max(len(c.order)-1, 0))
		if a.cfg.Protocol != ProtocolScalechat { // no seq, no resume: legacy.go
			a.checkLegacy(res, c, blame)
		} else {
			a.checkOwed(res, c, blame)
		}
		for n, at := range c.sent {
			res.Sent++
			if _, ok := a.delivered[msgKey{c.id, n}]; ok {
				continue
			}
			switch {
			case c.refused[n]:
				res.RefusedSends++
			case endedSoonAfter(c.ended, at):
				res.UnconfirmedSends++
			default:
				res.LostSends++
				if res.LostExample == "" {
					res.LostExample = fmt.Sprintf("%s's message %d in room %s, sent at %s", c.name, n, c.room, at.Format("15:04:05.000"))
				}
			}
		}
	}
	for _, f := range append([]results.AuditCounts{res.BeforeFaults}, faultCounts(res.Faults)...) {
		res.Missing += f.Missing
		res.Duplicates += f.Duplicates
		res.Reordered += f.Reordered
	}
	for k := range a.msgs {
		res.Accepted = append(res.Accepted, "a"+strconv.Itoa(k.sender)+"/"+strconv.FormatUint(k.counter, 10))
	}
	res.Guarantees = guarantees(res)
	for _, g := range res.Guarantees {
		res.Broken = res.Broken || !g.Held
	}
	return res
}

// checkOwed counts what member c owed: every message of its room some
// client received (the server accepted it), from c's first joined frame
// on, whichever node or seq it came under, against what c received and
// the gaps it was told of.
func (a *auditor) checkOwed(res *results.Audit, c *client, blame func(*client, time.Time) *results.AuditCounts) {
	for _, k := range a.byRoom[c.room] {
		m := a.msgs[k]
		switch a.owes(c, k, m) {
		case notOwed:
			continue
		case owedDelivered:
			res.Delivered++
		case owedFlagged:
			res.Flagged++
		case owedMissing:
			blame(c, m.first).Missing++
			if res.MissingExample == "" {
				res.MissingExample = fmt.Sprintf("%s missed %s (%s, first received at %s)",
					c.name, k, positions(m.at), m.first.Format("15:04:05.000"))
			}
		}
		res.Expected++
	}
}

// blameFor picks the fault an anomaly of client at t counts against: a
// node or Redis fault still under way (until 2 s after every client was
// back), else the client's own dropped connection still under way (until
// 1 s after it was back), else the last fault before t, else none.
func blameFor(res *results.Audit, client string, t time.Time) *results.AuditCounts {
	until := func(f *results.AuditFault, margin time.Duration) bool {
		return !f.At.After(t) && (!f.RecoveredOK || t.Before(f.At.Add(f.Recovered+margin)))
	}
	for i := len(res.Faults) - 1; i >= 0; i-- {
		if f := &res.Faults[i]; f.Kind != "drop" && until(f, 2*time.Second) {
			return &f.AuditCounts
		}
	}
	for i := len(res.Faults) - 1; i >= 0; i-- {
		if f := &res.Faults[i]; f.Kind == "drop" && f.Target == client && until(f, time.Second) {
			return &f.AuditCounts
		}
	}
	i := sort.Search(len(res.Faults), func(i int) bool { return res.Faults[i].At.After(t) }) - 1
	if i < 0 {
		return &res.BeforeFaults
	}
	return &res.Faults[i].AuditCounts
}

func faultCounts(fs []results.AuditFault) []results.AuditCounts {
	out := make([]results.AuditCounts, len(fs))
	for i, f := range fs {
		out[i] = f.AuditCounts
	}
	return out
}

// guarantees states docs/guarantees.md's promises against the figures.
func guarantees(res *results.Audit) []results.Guarantee {
	recovered := 0
	for _, f := range res.Faults {
		if f.RecoveredOK {
			recovered++
		}
	}
	return []results.Guarantee{
		{Name: "no loss: every message of a room reaches every member, or the member is told (history_gap)",
			Held: res.Missing == 0 && res.LostSends == 0,
			What: fmt.Sprintf("%d of %d owed deliveries missing without a gap, %d flagged by a gap, %d missed while away (no resume in the protocol); %d sends lost, %d unconfirmed (connection ended within 1 s), %d refused with an error frame",
				res.Missing, res.Expected, res.Flagged, res.MissedAway, res.LostSends, res.UnconfirmedSends, res.RefusedSends) +
				examples(res.MissingExample, res.LostExample)},
		{Name: "no duplicates: a member receives each message once, resumes included", Held: res.Duplicates == 0,
			What: fmt.Sprintf("%d duplicate deliveries; %d received again after a reset (the room started anew: told, not counted)", res.Duplicates, res.AfterReset) +
				examples(res.DuplicateExample)},
		{Name: "order: one order per room, seen by every member in seq order", Held: res.Reordered == 0 && res.Conflicts == 0 && res.SeqsTwoMessages == 0,
			What: fmt.Sprintf("%d out-of-order deliveries, %d messages with two seqs, %d seqs naming two messages", res.Reordered, res.Conflicts, res.SeqsTwoMessages) +
				examples(res.ConflictExample, res.SeqTwoExample)},
		{Name: "isolation: a member receives only its rooms' messages", Held: res.Foreign == 0,
			What: fmt.Sprintf("%d foreign deliveries", res.Foreign)},
		{Name: "recovery: after every fault, every client is back in its room", Held: recovered == len(res.Faults),
			What: fmt.Sprintf("%d of %d faults recovered from", recovered, len(res.Faults))},
	}
}

// examples appends to a guarantee's figures the examples of what broke
// it, those there are.
func examples(all ...string) string {
	var eg []string
	for _, e := range all {
		if e != "" {
			eg = append(eg, e)
		}
	}
	if len(eg) == 0 {
		return ""
	}
	return " (e.g. " + strings.Join(eg, "; ") + ")"
}

// positions names where a message was received: room, epoch and seq.
func positions(at []position) string {
	s := make([]string, len(at))
	for i, p := range at {
		s[i] = p.String()
	}
	return strings.Join(s, " and ")
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

// WriteSummary prints the verdict of r.
func WriteSummary(w io.Writer, r *results.Audit) error {
	var b strings.Builder
	fmt.Fprintf(&b, "audit: %d clients in %d rooms, %d messages sent, %d deliveries owed, %d delivered\n",
		r.Clients, r.Rooms, r.Sent, r.Expected, r.Delivered)
	if n := len(r.Faults); n > 0 {
		kinds := map[string]int{}
		var order []string
		var rec []time.Duration
		for _, f := range r.Faults {
			if kinds[f.Kind] == 0 {
				order = append(order, f.Kind)
			}
			kinds[f.Kind]++
			if f.RecoveredOK {
				rec = append(rec, f.Recovered)
			}
		}
		var parts []string
		for _, k := range order {
			parts = append(parts, fmt.Sprintf("%d × %s", kinds[k], k))
		}
		fmt.Fprintf(&b, "faults: %d (%s)", n, strings.Join(parts, ", "))
		slices.Sort(rec)
		if len(rec) > 0 {
			fmt.Fprintf(&b, "; back in the room after %s median, %s at most", rec[len(rec)/2].Round(time.Millisecond), rec[len(rec)-1].Round(time.Millisecond))
		}
		b.WriteString("\n")
		for _, f := range r.Faults {
			if f.Kind != "drop" || f.AuditCounts != (results.AuditCounts{}) {
				fmt.Fprintf(&b, "  %s %s on %s: back after %s; then %d missing, %d duplicates, %d reordered\n", f.At.Format("15:04:05.000"),
					f.Kind, f.Target, f.Recovered.Round(time.Millisecond), f.Missing, f.Duplicates, f.Reordered)
			}
		}
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
