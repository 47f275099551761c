package broker

import (
	"sync"
	"time"
)

// forward is a publish sent on to its room's owner, waiting for its seq.
type forward struct {
	p     Publication
	owner string
	sent  time.Time
	tries int // sent this many times (to the room's holder of the moment)
}

// maxForwardTries is how often a publish is sent on before its sender is
// refused, when the owner answered that it does not order the room now
// (loading it, just taken over) or the room was dropped here meanwhile;
// retryWait apart.
const (
	maxForwardTries = 3
	retryWait       = 100 * time.Millisecond
)

// followSet is this node's side of the owner protocol: the followers of
// each room it owns, the owner of each room it follows, the loads waiting
// for an owner's snapshot and the forwarded publishes waiting for their
// seq. Its lock is a leaf, taken under a room's lock (keep, Follow's add).
type followSet struct {
	mu        sync.Mutex
	followers map[string][]string       // room owned here → the nodes that follow it
	owners    map[string]string         // room followed here → its owner
	waiting   map[string]chan followRec // room loading from its owner → its answer
	pending   map[uint64]forward        // forwarded publishes by request id
	nextReq   uint64
}

func newFollowSet() followSet {
	return followSet{followers: map[string][]string{}, owners: map[string]string{},
		waiting: map[string]chan followRec{}, pending: map[uint64]forward{}}
}

// addFollower records that node follows room, owned here.
func (f *followSet) addFollower(room, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.followers[room] {
		if n == node {
			return
		}
	}
	f.followers[room] = append(f.followers[room], node)
}

func (f *followSet) removeFollower(room, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := f.followers[room]
	for i, n := range fs {
		if n == node {
			fs = append(fs[:i:i], fs[i+1:]...)
			break
		}
	}
	if len(fs) == 0 {
		delete(f.followers, room)
	} else {
		f.followers[room] = fs
	}
}

// followersOf returns the nodes following room; the slice is not to be
// changed.
func (f *followSet) followersOf(room string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.followers[room]
}

// takeFollowers returns and forgets the followers of room.
func (f *followSet) takeFollowers(room string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := f.followers[room]
	delete(f.followers, room)
	return fs
}

func (f *followSet) setFollowers(room string, nodes []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(nodes) == 0 {
		delete(f.followers, room)
		return
	}
	f.followers[room] = nodes
}

func (f *followSet) ownerOf(room string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.owners[room]
}

// setOwner records room's owner; "" forgets it.
func (f *followSet) setOwner(room, owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if owner == "" {
		delete(f.owners, room)
	} else {
		f.owners[room] = owner
	}
}

// followedFrom returns the rooms followed here whose owner is node.
func (f *followSet) followedFrom(node string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rooms []string
	for r, o := range f.owners {
		if o == node {
			rooms = append(rooms, r)
		}
	}
	return rooms
}

// await returns the channel a load of room waits on for its owner's answer.
func (f *followSet) await(room string) chan followRec {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := make(chan followRec, 1)
	f.waiting[room] = w
	return w
}

func (f *followSet) stopAwaiting(room string, w chan followRec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiting[room] == w {
		delete(f.waiting, room)
	}
}

// answer hands rec to the load of its room waiting for it, if any.
func (f *followSet) answer(rec followRec) {
	f.mu.Lock()
	w := f.waiting[rec.room]
	f.mu.Unlock()
	if w != nil {
		select {
		case w <- rec:
		default: // an answer to an earlier ask, still unread: this one is stale
		}
	}
}

// addPending records a forwarded publish and returns its request id.
func (f *followSet) addPending(p Publication, owner string, now time.Time, tries int) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextReq++
	f.pending[f.nextReq] = forward{p: p, owner: owner, sent: now, tries: tries}
	return f.nextReq
}

func (f *followSet) takePending(req uint64) (forward, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fw, ok := f.pending[req]
	delete(f.pending, req)
	return fw, ok
}

// takeExpired returns and forgets the forwarded publishes sent before
// deadline, or to owner when owner is not "".
func (f *followSet) takeExpired(deadline time.Time, owner string) []forward {
	f.mu.Lock()
	defer f.mu.Unlock()
	var fws []forward
	for req, fw := range f.pending {
		if fw.sent.Before(deadline) || owner != "" && fw.owner == owner {
			fws = append(fws, fw)
			delete(f.pending, req)
		}
	}
	return fws
}
