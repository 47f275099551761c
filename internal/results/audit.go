// An audit (`scalechat audit`) writes audit.json: what every client owed and
// received, each fault with what it cost, and a verdict per guarantee
// (docs/guarantees.md); `scalechat report` draws it.

package results

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// AuditJSON is the file an audit writes into its --out folder.
const AuditJSON = "audit.json"

// Audit is audit.json.
type Audit struct {
	Tool    string    `json:"tool"`
	Version string    `json:"version"`
	Args    []string  `json:"args"`
	Started time.Time `json:"started_at"`
	Ended   time.Time `json:"ended_at"`
	Clients int       `json:"clients"`
	Rooms   int       `json:"rooms"`
	Nodes   int       `json:"nodes"` // of the local cluster the audit started; 0: a server given by URL
	// Engine is what ties the local cluster's nodes: "Redis" (also when
	// empty, in files written before it), "a Redis Cluster", "NATS" or "a
	// NATS cluster of 3 servers".
	Engine string `json:"engine,omitempty"`

	Sent      int64 `json:"sent"`      // messages written by the clients
	Expected  int64 `json:"expected"`  // deliveries owed: every message of a client's room some client received (the server accepted it), from its first join on
	Delivered int64 `json:"delivered"` // distinct (client, message) deliveries that arrived
	// Accepted names the messages some client received (the server
	// accepted them), as "sender/message_id": what audit --webhooks checks
	// its message_published events against. Not in audit.json.
	Accepted []string `json:"-"`

	AuditCounts
	Flagged int64 `json:"flagged"` // owed, never arrived, announced by a history_gap
	// MissedAway counts, for a protocol without resume (legacy), what was
	// owed to a client while it was away: lost by design, not silently.
	MissedAway int64  `json:"missed_away"`
	Protocol   string `json:"protocol"`
	Foreign    int64  `json:"foreign"`   // chat frames of a room the client is not in
	Conflicts  int64  `json:"conflicts"` // one message delivered under two seqs (two orders)
	// ConflictExample names the first message received under a second
	// seq: the message, both positions and who received each.
	ConflictExample string `json:"conflict_example,omitempty"`
	// SeqsTwoMessages counts the (room, epoch, seq) that were received as
	// two different messages (two orders); SeqTwoExample names the first:
	// the position, both messages and who received each.
	SeqsTwoMessages int64  `json:"seqs_two_messages"`
	SeqTwoExample   string `json:"seq_two_example,omitempty"`
	// DuplicateExample names the first message a client received twice
	// in one epoch: the client, the message and where it came each time.
	DuplicateExample string `json:"duplicate_example,omitempty"`
	// LostSends are messages written on a connection that stayed up and
	// never delivered to anyone; UnconfirmedSends were written within a
	// second before their connection ended (they may never have reached
	// the server: the protocol has no acknowledgement).
	LostSends int64 `json:"lost_sends"`
	// LostExample names the first lost send: its sender, id, room and
	// when it was written, to find in the nodes' logs.
	LostExample string `json:"lost_example,omitempty"`
	// MissingExample names the first delivery owed and missing without a
	// gap: who missed which message, and where the others got it.
	MissingExample   string `json:"missing_example,omitempty"`
	UnconfirmedSends int64  `json:"unconfirmed_sends"`
	RefusedSends     int64  `json:"refused_sends"` // refused by the server with an error frame: the sender was told
	SendErrors       int64  `json:"send_errors"`
	NewStreams       int64  `json:"new_streams"` // a room that started anew under a client (another epoch)
	// AfterReset counts messages a client received again under a new
	// epoch of its room, after it was told reset: not duplicates of one
	// stream (the protocol tells the client), counted apart.
	AfterReset int64 `json:"after_reset"`

	Faults []AuditFault `json:"faults"`
	// BeforeFaults counts what went wrong before the first fault (or in a
	// run without faults).
	BeforeFaults AuditCounts `json:"before_faults"`

	Guarantees []Guarantee `json:"guarantees"`
	Broken     bool        `json:"broken"` // a guarantee failed
	FirstError string      `json:"first_error,omitempty"`
	// FirstRefusal is the first error frame a client got.
	FirstRefusal string `json:"first_refusal,omitempty"`
	// SLO holds the verdicts of audit --slo, the audit judged as one step
	// named "audit".
	SLO []SLOResult `json:"slo,omitempty"`
}

// AuditCounts are the deliveries that went wrong.
type AuditCounts struct {
	Missing    int64 `json:"missing"`    // owed, never arrived, not announced by a history_gap
	Duplicates int64 `json:"duplicates"` // a seq received again
	Reordered  int64 `json:"reordered"`  // a seq below the previous one on the same connection
}

// AuditFault is one injected fault and what went wrong after it, until the
// next fault.
type AuditFault struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`   // drop, node SIGKILL, node SIGTERM, node SIGSTOP, Redis restart, Redis failover, NATS restart, NATS server SIGKILL
	Target string    `json:"target"` // the client or node
	// Recovered is how long until the client (for a drop) or every client
	// was back in its room; RecoveredOK is false when that did not happen
	// before the run ended.
	Recovered   time.Duration `json:"recovered_ns"`
	RecoveredOK bool          `json:"recovered"`
	AuditCounts
}

// Guarantee is one stated delivery guarantee and whether the run kept it.
type Guarantee struct {
	Name string `json:"name"`
	Held bool   `json:"held"`
	What string `json:"what"` // the figures behind the verdict
}

// ReadAudit reads audit.json.
func ReadAudit(path string) (*Audit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var a Audit
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(a.Guarantees) == 0 {
		return nil, fmt.Errorf("%s holds no verdict", path)
	}
	return &a, nil
}
