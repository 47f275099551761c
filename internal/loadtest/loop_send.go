//go:build linux

package loadtest

import (
	"math/bits"

	"github.com/scalechat/scalechat/internal/results"
	"github.com/scalechat/scalechat/internal/ws"
)

// Sending: the open-loop schedule of each client's messages, and the
// Sent rows.

func (l *loop) sendDue(now int64) {
	st := l.st
	for range maxSendsPerRun {
		c := st.order[st.cursor]
		due := st.t0 + c.phase + st.round*st.intervalUs
		if due >= st.endUs {
			st.sending = false
			return
		}
		if due > now {
			return
		}
		if c.state == csReady {
			l.sendMessage(c, due)
		}
		st.cursor++
		if st.cursor == len(st.order) {
			st.cursor = 0
			st.round++
		}
	}
}

func (l *loop) sendMessage(c *client, due int64) {
	st := l.st
	m := &c.rooms[c.rr]
	c.rr++
	if int(c.rr) == len(c.rooms) {
		c.rr = 0
	}
	c.counter++
	p := l.wire.appendMessage(l.pbuf[:0], st.plan, m.room, c.id, c.counter, due, st.text)
	l.pbuf = p
	l.wbuf = ws.AppendMaskedFrame(l.wbuf[:0], ws.OpText, true, p, l.maskKey())
	now := l.clock.now()
	if !l.write(c, l.wbuf) {
		return
	}
	lag := max(now-due, 0)
	record(l.lag, lag)
	st.counts.Sent++
	if st.plan.echo {
		st.counts.Expected++
	} else {
		st.counts.Expected += st.global[m.room]
	}
	l.rows = results.AppendEvent(l.rows, &results.Event{Step: st.name, Room: st.plan.roomName(int(m.room)), Kind: results.Sent,
		MessageID: uint64(c.counter), SenderID: c.id, ClientID: c.id, UnixUS: due, LagUS: lag})
	l.rowDone()
}

// rand is xorshift64*: masking keys and phases need speed, not secrecy.
func (l *loop) rand() uint64 {
	x := l.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	l.rng = x
	hi, _ := bits.Mul64(x, 0x2545F4914F6CDD1D)
	return x*0x2545F4914F6CDD1D ^ hi
}

func (l *loop) maskKey() [4]byte {
	v := l.rand()
	return [4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
}
