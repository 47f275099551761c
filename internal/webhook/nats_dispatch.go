package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/scalechat/scalechat/internal/broker"
)

// The dispatcher's half of the NATS webhooks (nats.go): while this node
// holds the dispatcher's lease, Next loads the tally as of the cursor,
// reads the stream after it and decides the events; Commit writes the
// position the backend reached.

// natsCursorKey is the cursor's key in the counts bucket.
const natsCursorKey = "cursor"

// natsCursor is where the backend is: every event of the changes up to
// Base taken, and the first Next events of change Seq (when Seq > Base).
// The counts bucket holds the tally as of Base.
type natsCursor struct {
	Epoch string `json:"epoch"`
	Base  uint64 `json:"base"`
	Seq   uint64 `json:"seq,omitempty"`
	Next  int    `json:"next,omitempty"`
}

// natsEvent is an event decided and not yet committed: the idx-th event
// of change seq.
type natsEvent struct {
	ev  Event
	seq uint64
	idx int
}

// natsDispatch is the dispatcher's state, Next's and Commit's (dmu).
type natsDispatch struct {
	term    uint64 // the dispatcher's term it was loaded in; 0: not loaded
	cur     natsCursor
	curRev  uint64 // the cursor key's revision
	tally   *natsTally
	read    uint64 // the last stream seq applied
	buf     []natsEvent
	stream  jetstream.Stream
	it      jetstream.MessagesContext // the stream after the base, in order (an ordered consumer)
	saved   time.Time                 // when the tally was last written
	checked time.Time                 // when the cursor was last checked against the bucket's
}

// Next implements Source: while this node is the dispatcher, it returns
// the events decided after the cursor.
func (w *NATS) Next(ctx context.Context, max int) ([]Event, error) {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	d := &w.d
	for {
		term, ok := w.leading()
		if d.term != 0 && d.term != term { // the lease was lost: another may have moved on
			w.unload()
		}
		if !ok {
			if err := waitSignal(ctx, w.leadWake, w.lease/4); err != nil {
				return nil, err
			}
			continue
		}
		if d.term == 0 {
			if err := w.load(ctx, term); err != nil {
				w.unload()
				return nil, err
			}
		}
		if len(d.buf) > 0 {
			evs := make([]Event, 0, min(max, len(d.buf)))
			for _, e := range d.buf[:min(max, len(d.buf))] {
				evs = append(evs, e.ev)
			}
			return evs, nil
		}
		if len(d.tally.journal) > 0 && time.Since(d.saved) >= time.Second { // changes without events: the base moves on
			cur := d.cur
			cur.Base = d.read
			if err := w.save(ctx, cur); err != nil {
				return nil, err
			}
		}
		if time.Since(d.checked) >= w.lease {
			if err := w.check(ctx); err != nil {
				w.unload()
				return nil, err
			}
		}
		c, cancel := context.WithTimeout(ctx, time.Second) // then leading is checked again
		m, err := d.it.Next(jetstream.NextContext(c))
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
		case err != nil:
			w.unload()
			return nil, fmt.Errorf("read the webhooks' stream: %w", err)
		default:
			w.applyMsg(m)
			w.drain(255)
			w.publishNodes()
		}
	}
}

// waitSignal waits for c, at most d; an error only when ctx ended.
func waitSignal(ctx context.Context, c <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c:
	case <-t.C:
	}
	return nil
}

// applyMsg applies a change of the stream and keeps the events after the
// cursor.
func (w *NATS) applyMsg(m jetstream.Msg) {
	d := &w.d
	meta, err := m.Metadata()
	if err != nil || meta.Sequence.Stream <= d.read {
		return
	}
	seq := meta.Sequence.Stream
	d.read = seq
	var c natsChange
	if err := json.Unmarshal(m.Data(), &c); err != nil {
		w.errs.warn(w.log, "a webhook change that is not one: skipped", "seq", seq, "err", err)
		return
	}
	for i, e := range d.tally.apply(seq, meta.Timestamp.UnixMilli(), d.cur.Epoch, &c) {
		if seq == d.cur.Seq && i < d.cur.Next { // the backend took it before
			continue
		}
		d.buf = append(d.buf, natsEvent{e, seq, i})
	}
}

// drain applies up to n more changes already there, hardly waiting.
func (w *NATS) drain(n int) {
	for range n {
		m, err := w.d.it.Next(jetstream.NextMaxWait(time.Millisecond))
		if err != nil {
			return
		}
		w.applyMsg(m)
	}
}

// publishNodes tells reap the tally's nodes and incarnations.
func (w *NATS) publishNodes() {
	incs := make(map[string]string, len(w.d.tally.nodes))
	for n, v := range w.d.tally.nodes {
		incs[n] = v.I
	}
	w.lmu.Lock()
	defer w.lmu.Unlock()
	w.incs = incs
	for k := range w.goneSent {
		node, inc, _ := cutLast(k)
		if incs[node] != inc {
			delete(w.goneSent, k)
		}
	}
}

func cutLast(k string) (string, string, bool) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			return k[:i], k[i+1:], true
		}
	}
	return k, "", false
}

// load reads the cursor (a new epoch when there is none) and the tally as
// of its base, and starts reading the stream after it.
func (w *NATS) load(ctx context.Context, term uint64) error {
	d := &w.d
	var cur natsCursor
	var rev uint64
	e, err := w.counts.Get(ctx, natsCursorKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if cur, rev, err = w.newEpoch(ctx); err != nil {
			return err
		}
	case err != nil:
		if lostState(err) {
			_, _, _ = w.open(ctx)
		}
		return fmt.Errorf("read the webhook cursor: %w", err)
	default:
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return fmt.Errorf("the webhook cursor %q: %w", e.Value(), err)
		}
		rev = e.Revision()
	}
	tally := newNATSTally()
	var tombs []string
	kw, err := w.counts.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("read the webhook counts: %w", err)
	}
	defer func() { _ = kw.Stop() }()
read:
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-kw.Updates():
			if e == nil {
				break read
			}
			if e.Key() == natsCursorKey {
				continue
			}
			var s natsStored
			if err := json.Unmarshal(e.Value(), &s); err != nil {
				w.errs.warn(w.log, "a webhook count that is not one: skipped", "key", e.Key(), "err", err)
				continue
			}
			v := s.at(cur.Base)
			if err := tally.load(e.Key(), v); err != nil {
				w.errs.warn(w.log, "a webhook count that is not one: skipped", "key", e.Key(), "err", err)
			}
			if v == (natsSlot{}) && s.S <= cur.Base {
				tombs = append(tombs, e.Key())
			}
		}
	}
	st, err := w.js.Stream(ctx, w.stream)
	if err != nil {
		return fmt.Errorf("open the webhooks' stream: %w", err)
	}
	cons, err := w.js.OrderedConsumer(ctx, w.stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: cur.Base + 1})
	if err != nil {
		return fmt.Errorf("read the webhooks' stream: %w", err)
	}
	// Pulled as Next wants them: while the backend is away nothing is
	// read, and at most PullMaxMessages wait here.
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return fmt.Errorf("read the webhooks' stream: %w", err)
	}
	*d = natsDispatch{term: term, cur: cur, curRev: rev, tally: tally, read: cur.Base, stream: st,
		it: it, saved: time.Now(), checked: time.Now()}
	w.publishNodes()
	w.deleteKeys(ctx, tombs)
	w.log.Info("the webhook dispatcher goes on from the cursor", "node", w.id, "epoch", cur.Epoch, "base", cur.Base,
		"nodes", len(tally.nodes), "counts", len(tally.counts))
	return nil
}

// unload forgets the dispatcher's state: it loads again when it leads.
func (w *NATS) unload() {
	d := &w.d
	if d.it != nil {
		d.it.Stop()
	}
	*d = natsDispatch{}
	w.lmu.Lock()
	w.incs = nil
	w.lmu.Unlock()
}

// check makes sure the cursor and the stream are still the ones loaded:
// NATS may have lost them (a server restarted without its store).
func (w *NATS) check(ctx context.Context) error {
	d := &w.d
	e, err := w.counts.Get(ctx, natsCursorKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return errors.New("the webhook cursor is gone: NATS lost the state")
	case err != nil:
		return nil // not known: checked again later
	case e.Revision() != d.curRev:
		return errors.New("the webhook cursor moved: another dispatcher")
	}
	info, err := d.stream.Info(ctx)
	if err == nil && info.State.LastSeq < d.read {
		return errors.New("the webhooks' stream is shorter than what was read: NATS lost it")
	}
	d.checked = time.Now()
	return nil
}

// newEpoch starts a new epoch: the stream and the counts are purged, an
// epoch change appended (its Reset the first event) and the cursor
// written just before it. Each node, reading the cursor's new epoch at its
// next renewal, sends its whole state again (checkEpoch), after the epoch
// change.
func (w *NATS) newEpoch(ctx context.Context) (natsCursor, uint64, error) {
	epoch := broker.NewEpoch()
	for _, name := range []string{"KV_" + w.bucket, w.stream} {
		st, err := w.js.Stream(ctx, name)
		if err == nil {
			err = st.Purge(ctx)
		}
		if err != nil {
			return natsCursor{}, 0, fmt.Errorf("purge %s for a new webhook epoch: %w", name, err)
		}
	}
	seq, err := w.appendChangeSeq(ctx, &natsChange{Op: natsOpEpoch, Epoch: epoch}, "")
	if err != nil {
		return natsCursor{}, 0, err
	}
	cur := natsCursor{Epoch: epoch, Base: seq - 1}
	data, _ := json.Marshal(cur)
	rev, err := w.counts.Create(ctx, natsCursorKey, data)
	if err != nil {
		return natsCursor{}, 0, fmt.Errorf("write the webhook cursor: %w", err)
	}
	w.mu.Lock()
	w.epoch, w.resync = epoch, true // this node's own sync, at once
	w.mu.Unlock()
	wake(w.wake)
	w.log.Info("a new webhook epoch: every node sends its whole state", "epoch", epoch)
	return cur, rev, nil
}

// Commit implements Source: the tally as of the new base, then the
// cursor (compare-and-set), only while this node holds the dispatcher's
// lease; then the stream is trimmed below the base.
func (w *NATS) Commit(ctx context.Context, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	w.dmu.Lock()
	defer w.dmu.Unlock()
	d := &w.d
	term, ok := w.leading()
	if d.term == 0 || d.term != term || !ok {
		return ErrNotDispatcher
	}
	n := len(evs)
	if n > len(d.buf) || d.buf[0].ev.ID != evs[0].ID || d.buf[n-1].ev.ID != evs[n-1].ID {
		return errors.New("webhook commit of events that are not the last ones Next returned")
	}
	last := d.buf[n-1]
	cur := d.cur
	cur.Seq, cur.Next, cur.Base = last.seq, last.idx+1, d.read
	if n < len(d.buf) {
		cur.Base = d.buf[n].seq - 1
	}
	if err := w.save(ctx, cur); err != nil {
		return err
	}
	d.buf = append([]natsEvent(nil), d.buf[n:]...)
	return nil
}

// save writes the tally's slots that changed up to cur.Base, then cur.
// A cursor another dispatcher moved is ErrNotDispatcher.
func (w *NATS) save(ctx context.Context, cur natsCursor) error {
	d := &w.d
	ctx, cancel := context.WithTimeout(ctx, w.lease/2)
	defer cancel()
	if _, ok := w.leading(); !ok {
		return ErrNotDispatcher
	}
	writes := d.tally.upTo(cur.Base)
	var zeros []string
	futures := make([]jetstream.PubAckFuture, 0, len(writes))
	for _, wr := range writes {
		data, _ := json.Marshal(wr.val)
		f, err := w.js.PublishAsync("$KV."+w.bucket+"."+wr.key, data)
		if err != nil {
			return fmt.Errorf("write the webhook counts: %w", err)
		}
		futures = append(futures, f)
		if wr.val.V == (natsSlot{}) {
			zeros = append(zeros, wr.key)
		}
	}
	if err := waitAcks(ctx, futures); err != nil {
		return fmt.Errorf("write the webhook counts: %w", err)
	}
	if _, ok := w.leading(); !ok {
		return ErrNotDispatcher
	}
	data, _ := json.Marshal(cur)
	rev, err := w.counts.Update(ctx, natsCursorKey, data, d.curRev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) {
		w.unload()
		return ErrNotDispatcher
	}
	if err != nil {
		return fmt.Errorf("write the webhook cursor: %w", err)
	}
	moved := cur.Base > d.cur.Base
	d.cur, d.curRev, d.saved = cur, rev, time.Now()
	d.tally.dropJournal(cur.Base)
	w.deleteKeys(ctx, zeros)
	if moved {
		if err := d.stream.Purge(ctx, jetstream.WithPurgeSequence(cur.Base+1)); err != nil {
			w.errs.warn(w.log, "the webhooks' stream not trimmed: trimmed at the next commit", "err", err)
		}
	}
	return nil
}

// deleteKeys deletes counts that are 0 as of the cursor's base (absent
// is 0), best effort: one left is read as 0.
func (w *NATS) deleteKeys(ctx context.Context, keys []string) {
	futures := make([]jetstream.PubAckFuture, 0, len(keys))
	for _, k := range keys {
		m := nats.NewMsg("$KV." + w.bucket + "." + k)
		m.Header.Set("KV-Operation", "DEL")
		f, err := w.js.PublishMsgAsync(m)
		if err != nil {
			break
		}
		futures = append(futures, f)
	}
	_ = waitAcks(ctx, futures)
}

// waitAcks waits for every publish of futures to be stored.
func waitAcks(ctx context.Context, futures []jetstream.PubAckFuture) error {
	for _, f := range futures {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.Ok():
		case err := <-f.Err():
			return err
		}
	}
	return nil
}
