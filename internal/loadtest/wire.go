//go:build linux

package loadtest

import (
	"bytes"
	"strconv"
	"time"

	"github.com/scalechat/scalechat/internal/protocol"
)

// A wire is how the load tester speaks to one kind of server (--protocol):
// how a client connects and joins its rooms, how a message carries its
// sender, id and due time, and how a delivery is recognised. The loops do
// the rest (sockets, framing, schedule, rows) the same for every protocol.
type wire interface {
	// offer is the subprotocol the upgrade request offers ("" for none).
	offer() string
	// path is the request path of a client whose first room is room.
	path(t target, p *stepPlan, room int) string
	// start says how a client gets into its rooms once upgraded.
	start() startMode
	// appendHello appends the first frame's payload of a startHello client.
	appendHello(dst []byte) []byte
	// appendJoin appends the payload that asks to join room; id numbers the
	// request among the client's (1 is the hello).
	appendJoin(dst []byte, p *stepPlan, room int32, id int) []byte
	// appendMessage appends the payload of message counter of sender, due
	// at due (unix µs), posted to room.
	appendMessage(dst []byte, p *stepPlan, room int32, sender uint64, counter uint32, due int64, text string) []byte
	// decode appends what the frame p holds to in (a frame may hold several
	// replies).
	decode(p []byte, in []inbound) []inbound
}

// startMode says how a client gets into its rooms after the upgrade.
type startMode uint8

const (
	startReady startMode = iota // in its one room at once (legacy, echo)
	startURL                    // the URL joins the first room; a joined frame confirms it, then join the others
	startHello                  // send a hello, then join every room when it is answered
)

// inKind classifies a frame (or one reply of it) from the server.
type inKind uint8

const (
	inOther   inKind = iota // nothing the run counts (replies to publishes, presence, …)
	inMessage               // a chat message: a delivery, if it is one of the run's
	inJoined                // a room was joined (room, seq)
	inHello                 // the hello was answered
	inError                 // a refusal (text)
	inPing                  // the server wants the payload pong back as a frame
	inInvalid               // not a frame of the protocol
)

// inbound is one thing the server said. Byte slices alias the frame.
type inbound struct {
	kind    inKind
	room    []byte // the room's name; nil when the frame names none
	hasID   bool
	sender  uint64 // run-wide client id of the sender
	counter uint64 // the sender's message counter
	hasDue  bool
	due     int64 // unix µs
	hasSeq  bool
	seq     uint64
	reqID   uint64 // inJoined without a room: the id of the join request
	text    []byte // inError: what the server said; inPing: the payload to send back
}

// newWire returns the adapter of protocol name (Config.Protocol).
func newWire(cfg *Config) wire {
	switch cfg.Protocol {
	case ProtocolLegacy:
		return legacyWire{}
	case ProtocolCentrifugo:
		return centrifugoWire{ns: cfg.Namespace}
	case ProtocolEcho:
		return echoWire{}
	case ProtocolSocketIO:
		return newSocketIOWire(cfg.Namespace)
	}
	return scalechatWire{}
}

// appendRunFields appends the fields a message of the run carries, without
// braces: the wire message id sender<<32 | counter (so that any recipient
// knows who sent it), the due time and the text.
func appendRunFields(dst []byte, sender uint64, counter uint32, due int64, text string) []byte {
	dst = append(dst, `"message_id":`...)
	dst = strconv.AppendUint(dst, sender<<32|uint64(counter), 10)
	dst = append(dst, `,"due_us":`...)
	dst = strconv.AppendInt(dst, due, 10)
	dst = append(dst, `,"text":"`...)
	dst = append(dst, text...)
	return append(dst, '"')
}

// idFields fills the sender, counter and due time of a message that
// carries the run's message id.
func (in *inbound) idFields(f *frameFields) {
	in.hasID, in.sender, in.counter = f.hasID, f.messageID>>32, f.messageID&0xffffffff
	in.hasDue, in.due = f.hasDue, int64(f.dueUs)
}

// scalechatWire speaks docs/protocol.md with the control frames
// (protocol.Subprotocol).
type scalechatWire struct{}

func (scalechatWire) offer() string { return protocol.Subprotocol }
func (scalechatWire) path(t target, p *stepPlan, room int) string {
	return t.roomPath(p.roomName(room))
}
func (scalechatWire) start() startMode              { return startURL }
func (scalechatWire) appendHello(dst []byte) []byte { return dst }

func (scalechatWire) appendJoin(dst []byte, p *stepPlan, room int32, _ int) []byte {
	dst = append(dst, `{"type":"join","room":"`...)
	dst = append(dst, p.roomPre...)
	dst = strconv.AppendInt(dst, int64(room), 10)
	return append(dst, `"}`...)
}

func (scalechatWire) appendMessage(dst []byte, p *stepPlan, room int32, sender uint64, counter uint32, due int64, text string) []byte {
	dst = append(dst, `{"room":"`...)
	dst = append(dst, p.roomPre...)
	dst = strconv.AppendInt(dst, int64(room), 10)
	dst = append(dst, `",`...)
	dst = appendRunFields(dst, sender, counter, due, text)
	return append(dst, '}')
}

func (scalechatWire) decode(p []byte, in []inbound) []inbound {
	var f frameFields
	if !parseFields(p, &f) {
		return append(in, inbound{kind: inInvalid})
	}
	x := inbound{kind: inMessage, room: f.room, hasSeq: f.hasSeq, seq: f.seq}
	if f.hasType {
		switch string(f.typ) {
		case "joined":
			x.kind = inJoined
		case "error":
			x.kind, x.text = inError, p
		default:
			x.kind = inOther
		}
		return append(in, x)
	}
	x.idFields(&f)
	return append(in, x)
}

// echoWire speaks to any echo server: the URL is used as is and every
// client expects its own messages back.
type echoWire struct{}

func (echoWire) offer() string                            { return "" }
func (echoWire) path(t target, _ *stepPlan, _ int) string { return t.path }
func (echoWire) start() startMode                         { return startReady }
func (echoWire) appendHello(dst []byte) []byte            { return dst }
func (echoWire) appendJoin(dst []byte, _ *stepPlan, _ int32, _ int) []byte {
	return dst
}

func (echoWire) appendMessage(dst []byte, _ *stepPlan, _ int32, sender uint64, counter uint32, due int64, text string) []byte {
	dst = append(dst, '{')
	dst = appendRunFields(dst, sender, counter, due, text)
	return append(dst, '}')
}

func (echoWire) decode(p []byte, in []inbound) []inbound {
	var f frameFields
	if !parseFields(p, &f) {
		return append(in, inbound{kind: inInvalid})
	}
	x := inbound{kind: inMessage}
	x.idFields(&f)
	return append(in, x)
}

// legacyWire speaks the original five-field JSON (MerzMax/scale-chat):
// the room comes from the URL, a client is in its room once upgraded, the
// server sends chat frames only. The server decodes every message into
// five fields and encodes them again, dropping any other, and hands it to
// the clients whose URL room is the message's "room": so a message carries
// all five, as the original client (src/client/client.go) encodes them, and
// says who sent it in "sender" (the run-wide client id) and "message_id"
// (the sender's counter), and when it was due in "sent_at".
type legacyWire struct{}

func (legacyWire) offer() string { return "" }
func (legacyWire) path(t target, p *stepPlan, room int) string {
	return t.roomPath(p.roomName(room))
}
func (legacyWire) start() startMode              { return startReady }
func (legacyWire) appendHello(dst []byte) []byte { return dst }
func (legacyWire) appendJoin(dst []byte, _ *stepPlan, _ int32, _ int) []byte {
	return dst
}

// appendMessage writes the fields in the order and form json.Marshal gives
// the original's chat.Message, so the frame comes back as it was sent.
func (legacyWire) appendMessage(dst []byte, p *stepPlan, room int32, sender uint64, counter uint32, due int64, text string) []byte {
	dst = append(dst, `{"message_id":`...)
	dst = strconv.AppendUint(dst, uint64(counter), 10)
	dst = append(dst, `,"text":"`...)
	dst = append(dst, text...)
	dst = append(dst, `","sender":"`...)
	dst = strconv.AppendUint(dst, sender, 10)
	dst = append(dst, `","sent_at":"`...)
	dst = time.UnixMicro(due).UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","room":"`...)
	dst = append(dst, p.roomPre...)
	dst = strconv.AppendInt(dst, int64(room), 10)
	return append(dst, `"}`...)
}

func (legacyWire) decode(p []byte, in []inbound) []inbound {
	var f frameFields
	if !parseFields(p, &f) {
		return append(in, inbound{kind: inInvalid})
	}
	if f.hasType {
		return append(in, inbound{kind: inOther}) // a server that sends control frames anyway
	}
	x := inbound{kind: inMessage, room: f.room}
	x.sender, x.hasID = parseUint(f.sender)
	x.counter = f.messageID
	x.hasID = x.hasID && f.hasID
	x.due, x.hasDue = parseTime(f.sentAt)
	return append(in, x)
}

// centrifugoWire speaks the Centrifugo client protocol over JSON (the
// centrifuge library's protocol v2): a connect command, a subscription to
// NAMESPACE:ROOM per room, publish commands; deliveries are publication
// pushes. A frame may hold several replies, one per line; an empty object
// is the server's ping, answered with one.
type centrifugoWire struct{ ns string }

// centrifugoPublishID numbers publish commands above any subscription's.
const centrifugoPublishID = 1 << 20

func (centrifugoWire) offer() string                            { return "" }
func (centrifugoWire) path(t target, _ *stepPlan, _ int) string { return t.path }
func (centrifugoWire) start() startMode                         { return startHello }
func (centrifugoWire) appendHello(dst []byte) []byte {
	return append(dst, `{"id":1,"connect":{"name":"scalechat-loadtest"}}`...)
}

func (w centrifugoWire) channel(dst []byte, p *stepPlan, room int32) []byte {
	if w.ns != "" {
		dst = append(dst, w.ns...)
		dst = append(dst, ':')
	}
	dst = append(dst, p.roomPre...)
	return strconv.AppendInt(dst, int64(room), 10)
}

func (w centrifugoWire) appendJoin(dst []byte, p *stepPlan, room int32, id int) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, `,"subscribe":{"channel":"`...)
	dst = w.channel(dst, p, room)
	return append(dst, `"}}`...)
}

func (w centrifugoWire) appendMessage(dst []byte, p *stepPlan, room int32, sender uint64, counter uint32, due int64, text string) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendUint(dst, centrifugoPublishID+uint64(counter), 10)
	dst = append(dst, `,"publish":{"channel":"`...)
	dst = w.channel(dst, p, room)
	dst = append(dst, `","data":{`...)
	dst = appendRunFields(dst, sender, counter, due, text)
	return append(dst, `}}}`...)
}

func (w centrifugoWire) decode(p []byte, in []inbound) []inbound {
	for len(p) > 0 {
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		in = append(in, w.reply(line))
	}
	return in
}

// reply reads one reply of the server.
func (w centrifugoWire) reply(b []byte) inbound {
	if t := bytes.TrimSpace(b); len(t) == 2 && t[0] == '{' && t[1] == '}' {
		return inbound{kind: inPing, text: t}
	}
	if e, ok := objectField(b, "error"); ok {
		return inbound{kind: inError, text: e}
	}
	if push, ok := objectField(b, "push"); ok {
		return w.push(push)
	}
	idv, ok := objectField(b, "id")
	if !ok {
		return inbound{kind: inOther}
	}
	id, ok := parseUint(idv)
	switch {
	case !ok:
		return inbound{kind: inInvalid}
	case id == 1:
		return inbound{kind: inHello}
	case id < centrifugoPublishID:
		return inbound{kind: inJoined, reqID: id}
	}
	return inbound{kind: inOther}
}

// push reads a push: a publication in a channel of the namespace.
func (w centrifugoWire) push(b []byte) inbound {
	ch, ok := objectField(b, "channel")
	pub, ok2 := objectField(b, "pub")
	if !ok || !ok2 {
		return inbound{kind: inOther} // join, leave and other pushes
	}
	if w.ns != "" {
		if len(ch) <= len(w.ns) || string(ch[:len(w.ns)]) != w.ns || ch[len(w.ns)] != ':' {
			return inbound{kind: inMessage, room: ch} // not a channel of ours: unexpected
		}
		ch = ch[len(w.ns)+1:]
	}
	x := inbound{kind: inMessage, room: ch}
	if off, ok := objectField(pub, "offset"); ok {
		x.seq, x.hasSeq = parseUint(off)
	}
	data, ok := objectField(pub, "data")
	var f frameFields
	if !ok || !parseFields(data, &f) {
		return x // a publication not of this run
	}
	x.idFields(&f)
	return x
}
