package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsHistory is the NATS engine's history (docs/nats.md, step 4): one
// JetStream stream, a subject a room, <prefix>.hist.<key> (roomKey), each
// stream message a room's run of messages with consecutive seqs, framed as
// the Redis engine's entries are (runValue), its last seq and epoch in
// headers: a round of a room costs one stream message, as it costs one
// XADD on Redis (redis_entry.go).
//
// The fence: an owner writes a room's run only if the subject's last stream
// sequence is still the one it wrote (or read, when it took the room) last
// (Nats-Expected-Last-Subject-Sequence), and a takeover marks the subject
// with the new epoch (mark), after which a stale owner's next write fails:
// persist.lua's refusal of a room another node took.
type natsHistory struct {
	stream jetstream.Stream
	js     jetstream.JetStream
	prefix string
}

// Headers of a history message.
const (
	histLastHeader  = "Scalechat-Last"  // the seq of the run's last message
	histEpochHeader = "Scalechat-Epoch" // the stream's epoch; alone (no last): a takeover's mark
)

// natsHistoryWait bounds a history call whose context has no deadline.
const natsHistoryWait = 5 * time.Second

// newNATSHistory opens (or makes) the history stream, name, on js: subjects
// <prefix>.hist.>, runs a room's subject keeps, kept on replicas servers.
func newNATSHistory(ctx context.Context, js jetstream.JetStream, name, prefix string, runs int64, replicas int) (*natsHistory, error) {
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{prefix + ".hist.>"}, Storage: jetstream.FileStorage,
		MaxMsgsPerSubject: runs, Discard: jetstream.DiscardOld, Replicas: replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("open the history stream %s: %w", name, err)
	}
	return &natsHistory{stream: st, js: js, prefix: prefix}, nil
}

func (h *natsHistory) subject(room string) string { return h.prefix + ".hist." + roomKey(room) }

// write appends run, messages of room with consecutive seqs, in epoch, if
// the room's subject still ends at stream sequence after (0: it holds
// nothing), and returns the new end: the after of the room's next write.
// errRoomMoved when it does not (the room was taken over, or written by
// another node).
func (h *natsHistory) write(ctx context.Context, room, epoch string, run []Entry, after uint64) (uint64, error) {
	if len(run) == 0 {
		return after, nil
	}
	ack, err := h.js.PublishMsg(ctx, h.runMsg(room, epoch, run), jetstream.WithExpectLastSequencePerSubject(after))
	if err != nil {
		if isWrongLastSequence(err) {
			return 0, errRoomMoved
		}
		return 0, fmt.Errorf("write room %q's history: %w", room, err)
	}
	return ack.Sequence, nil
}

// runMsg is run, messages of room with consecutive seqs in epoch, as one
// stream message.
func (h *natsHistory) runMsg(room, epoch string, run []Entry) *nats.Msg {
	msgs := make([][]byte, len(run))
	for i, e := range run {
		msgs[i] = e.Payload
	}
	m := nats.NewMsg(h.subject(room))
	m.Data = runValue(msgs)
	m.Header.Set(histLastHeader, strconv.FormatUint(run[len(run)-1].Seq, 10))
	m.Header.Set(histEpochHeader, epoch)
	return m
}

// mark starts epoch on room's subject (a takeover), whatever was written
// before, and returns the subject's new end.
func (h *natsHistory) mark(ctx context.Context, room, epoch string) (uint64, error) {
	m := nats.NewMsg(h.subject(room))
	m.Header.Set(histEpochHeader, epoch)
	ack, err := h.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("mark room %q's history with a new epoch: %w", room, err)
	}
	return ack.Sequence, nil
}

// end returns the end of room's subject: the after of the next write of a
// node that takes the room on without reading it.
func (h *natsHistory) end(ctx context.Context, room string) (uint64, error) {
	ctx, cancel := withDeadline(ctx, natsHistoryWait)
	defer cancel()
	last, err := h.stream.GetLastMsgForSubject(ctx, h.subject(room))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read room %q's history: %w", room, err)
	}
	return last.Sequence, nil
}

// read returns room's history: its epoch (the last mark's or run's), the
// newest n messages of that epoch in seq order, and the subject's end (the
// after of a write that follows what was read). An empty epoch: nothing
// was ever written.
func (h *natsHistory) read(ctx context.Context, room string, n int) (epoch string, msgs []Entry, end uint64, err error) {
	ctx, cancel := withDeadline(ctx, natsHistoryWait)
	defer cancel()
	last, err := h.stream.GetLastMsgForSubject(ctx, h.subject(room))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil, 0, nil
	}
	if err != nil {
		return "", nil, 0, fmt.Errorf("read room %q's history: %w", room, err)
	}
	c, err := h.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{h.subject(room)}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return "", nil, 0, fmt.Errorf("read room %q's history: %w", room, err)
	}
	for {
		batch, err := c.Fetch(256, jetstream.FetchContext(ctx))
		if err != nil {
			return "", nil, 0, fmt.Errorf("read room %q's history: %w", room, err)
		}
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return "", nil, 0, fmt.Errorf("read room %q's history: %w", room, err)
			}
			epoch, msgs = appendHistoryMsg(epoch, msgs, m.Headers(), m.Data())
			if meta.Sequence.Stream >= last.Sequence {
				if len(msgs) > n {
					msgs = msgs[len(msgs)-n:]
				}
				return epoch, msgs, last.Sequence, nil
			}
		}
		if err := batch.Error(); err != nil {
			return "", nil, 0, fmt.Errorf("read room %q's history: %w", room, err)
		}
	}
}

// appendHistoryMsg adds one history message to what was read: a mark, or a
// run of another epoch, starts the messages again; a run adds its messages
// above the last one read (a run written after a follower's fill may begin
// below it: the same messages, one epoch). A message that is neither adds
// nothing.
func appendHistoryMsg(epoch string, msgs []Entry, hdr nats.Header, data []byte) (string, []Entry) {
	e := hdr.Get(histEpochHeader)
	last, err := strconv.ParseUint(hdr.Get(histLastHeader), 10, 64)
	if e != epoch {
		epoch, msgs = e, msgs[:0]
	}
	if hdr.Get(histLastHeader) == "" || err != nil {
		return epoch, msgs // a mark, or not one of ours
	}
	run, ok := splitRun(data)
	if !ok || uint64(len(run)) > last {
		return epoch, msgs
	}
	first := last - uint64(len(run)) + 1
	for k, p := range run {
		seq := first + uint64(k)
		if len(msgs) > 0 && seq <= msgs[len(msgs)-1].Seq {
			continue
		}
		msgs = append(msgs, Entry{Seq: seq, Payload: p})
	}
	return epoch, msgs
}
