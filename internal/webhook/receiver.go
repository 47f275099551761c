package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"time"
)

// Receiver is a backend's end of the webhooks, for tests and audits: an
// http.Handler that checks each request's signature, drops events it has
// seen (by ID), and checks the rest against the rules every backend may
// rely on, per epoch: a room is occupied and vacated in turn, a user joins
// and leaves a room in turn, goes online and offline in turn, starting
// with occupied, joined and online.
type Receiver struct {
	secret    []byte
	tolerance time.Duration
	now       func() time.Time // the receiver's clock: a test moves it

	mu         sync.Mutex
	seen       map[string]bool
	events     []Event
	duplicates int
	requests   int
	badSigs    int
	stale      int
	violations []string
	epoch      string
	rooms      map[string]bool
	members    map[[2]string]bool
	users      map[string]bool
	gaps       int
	// unsure is set by a Dropped event: the view may be wrong until the
	// next reset, and a key's first event after the gap (in touched) is
	// taken whatever it says, as a backend that fetched the state would.
	unsure  bool
	touched map[string]bool
	changed chan struct{}
}

// NewReceiver returns a receiver of requests signed with secret.
func NewReceiver(secret []byte) *Receiver {
	r := &Receiver{secret: secret, tolerance: DefaultTolerance, now: time.Now, seen: map[string]bool{}, changed: make(chan struct{})}
	r.resetLocked("")
	return r
}

// ServeHTTP implements http.Handler: 204 for a request taken, 401 for a bad
// signature or a timestamp outside DefaultTolerance, 400 for a body that
// is not events.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { close(r.changed); r.changed = make(chan struct{}) }()
	r.requests++
	switch err := Verify(r.secret, body, req.Header.Get(TimestampHeader), req.Header.Get(SignatureHeader), r.now(), r.tolerance); {
	case errors.Is(err, ErrStale):
		r.stale++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	case err != nil:
		r.badSigs++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var b Body
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
		return
	}
	for _, e := range b.Events {
		if r.seen[e.ID] {
			r.duplicates++
			continue
		}
		r.seen[e.ID] = true
		r.events = append(r.events, e)
		r.applyLocked(e)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *Receiver) resetLocked(epoch string) {
	r.epoch = epoch
	r.rooms, r.members, r.users = map[string]bool{}, map[[2]string]bool{}, map[string]bool{}
	r.unsure, r.touched = false, nil
}

// sure reports whether the view of key can be held to the rules: no gap
// since the reset, or an event of key seen since the gap.
func (r *Receiver) sure(key string) bool {
	if !r.unsure {
		return true
	}
	seen := r.touched[key]
	r.touched[key] = true
	return seen
}

// applyLocked moves the receiver's view by e and notes what breaks a rule.
func (r *Receiver) applyLocked(e Event) {
	switch e.Name {
	case Reset:
		r.resetLocked(e.Epoch)
		return
	case Dropped:
		r.gaps++
		r.unsure, r.touched = true, map[string]bool{}
		return
	}
	if e.Epoch != r.epoch {
		r.violations = append(r.violations, fmt.Sprintf("%s %s of epoch %q before its reset (in %q)", e.ID, e.Name, e.Epoch, r.epoch))
		r.resetLocked(e.Epoch)
	}
	turn := func(m map[string]bool, k string, on bool, what string) {
		if r.sure(what[:4]+"\x00"+k) && m[k] == on {
			r.violations = append(r.violations, fmt.Sprintf("%s %s %q twice in a row", e.ID, what, k))
		}
		if on {
			m[k] = true
		} else {
			delete(m, k)
		}
	}
	switch e.Name {
	case RoomOccupied, RoomVacated:
		turn(r.rooms, e.Room, e.Name == RoomOccupied, e.Name)
	case UserOnline, UserOffline:
		turn(r.users, e.User, e.Name == UserOnline, e.Name)
	case MemberJoined, MemberLeft:
		k := [2]string{e.Room, e.User}
		sure := r.sure("memb\x00" + e.Room + "\x00" + e.User)
		if sure && r.members[k] == (e.Name == MemberJoined) {
			r.violations = append(r.violations, fmt.Sprintf("%s %s %q/%q twice in a row", e.ID, e.Name, e.Room, e.User))
		}
		if e.Name == MemberJoined {
			r.members[k] = true
			if sure && (!r.rooms[e.Room] || !r.users[e.User]) {
				r.violations = append(r.violations, fmt.Sprintf("%s %s %q/%q in a room not occupied or by a user not online", e.ID, e.Name, e.Room, e.User))
			}
		} else {
			delete(r.members, k)
		}
	}
}

// View is what a receiver believes now: the rooms occupied, the users
// online, and each room's members (sorted).
type View struct {
	Rooms   []string
	Users   []string
	Members map[string][]string
}

// ReceiverStats is what a receiver took.
type ReceiverStats struct {
	Requests, BadSignatures, Duplicates, Events int
	Stale                                       int // requests refused for their timestamp
	Gaps                                        int // dropped events taken: the view was unsure after each
	Violations                                  []string
}

// View returns what the receiver believes now.
func (r *Receiver) View() View {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := View{Members: map[string][]string{}}
	for k := range r.rooms {
		v.Rooms = append(v.Rooms, k)
	}
	for k := range r.users {
		v.Users = append(v.Users, k)
	}
	for k := range r.members {
		v.Members[k[0]] = append(v.Members[k[0]], k[1])
	}
	sort.Strings(v.Rooms)
	sort.Strings(v.Users)
	for _, us := range v.Members {
		sort.Strings(us)
	}
	return v
}

// Stats returns the receiver's counts and the rules broken so far.
func (r *Receiver) Stats() ReceiverStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReceiverStats{Requests: r.requests, BadSignatures: r.badSigs, Duplicates: r.duplicates, Stale: r.stale, Gaps: r.gaps,
		Events: len(r.events), Violations: append([]string(nil), r.violations...)}
}

// Events returns the events taken, without duplicates, in order.
func (r *Receiver) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Changed returns a channel closed at the next request answered: a test waits
// on it, not on a sleep.
func (r *Receiver) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Await waits until the receiver believes want (nil Members meaning none),
// woken by each request it answers, and reports whether it did within
// timeout.
func (r *Receiver) Await(want View, timeout time.Duration) bool {
	if want.Members == nil {
		want.Members = map[string][]string{}
	}
	deadline := time.After(timeout)
	for {
		changed := r.Changed()
		if reflect.DeepEqual(r.View(), want) {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}
