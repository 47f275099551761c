//go:build linux

package server

import "sync"

// waiters are the HTTP publishes (the server API's, long polling's POST)
// waiting for a seq that the broker answers after Publish returned: a
// publish sent on to its room's owner on another node.
type waiters struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]chan answer
}

// answer is a publish's late answer (broker.Handler.Settled): its seq, or 0
// and why it has none.
type answer struct {
	seq uint64
	err error
}

// add returns a new publish ID (broker.Publication.ID) and the channel its
// answer comes on.
func (w *waiters) add() (uint64, chan answer) {
	ch := make(chan answer, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[uint64]chan answer)
	}
	w.next++
	id := waiterBit | w.next
	w.m[id] = ch
	return id, ch
}

// remove forgets id: its answer came, or nobody waits any more.
func (w *waiters) remove(id uint64) {
	w.mu.Lock()
	delete(w.m, id)
	w.mu.Unlock()
}

// settle hands id's answer to its waiter, if one still waits.
func (w *waiters) settle(id uint64, a answer) {
	w.mu.Lock()
	ch, ok := w.m[id]
	delete(w.m, id)
	w.mu.Unlock()
	if ok {
		ch <- a // room for one, and only one answer comes
	}
}
