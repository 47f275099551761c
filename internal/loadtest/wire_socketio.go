//go:build linux

package loadtest

import (
	"bytes"
	"strconv"
	"strings"
)

// socketioWire speaks Socket.IO v5 over Engine.IO v4, straight on a
// WebSocket (no long-polling first), with the room convention of
// docs/loadtest.md: emit("join", room) acknowledged once the socket is in
// the room, and "chat" events whose payload names the room, which the
// server emits to the room, sender included.
//
// What it relies on, read in socket.io 4.8.4's engine.io-parser 5.2.3 and
// socket.io-parser 4.2.7 and checked against the real server by
// TestSocketIOProtocolAgainstSocketIO (deploy/socketio):
//   - Each Engine.IO packet is one WebSocket text frame: a type digit, then
//     its data (0 open, 1 close, 2 ping, 3 pong, 4 message, 6 noop).
//   - The server speaks first (the open packet) and pings: "2" is answered
//     with "3", or the server closes the connection after pingTimeout.
//   - A message carries a Socket.IO packet: a type digit (0 CONNECT,
//     1 DISCONNECT, 2 EVENT, 3 ACK, 4 CONNECT_ERROR, 5 and 6 binary), then
//     "N-" for binary ones, "/nsp," for a namespace other than "/", the
//     acknowledgement id's digits, and JSON data: EVENT ["name", args…],
//     ACK [args…], CONNECT {"sid":…}, CONNECT_ERROR {"message":…}.
//   - The client's CONNECT ("40") may follow the upgrade at once: the server
//     is listening for it from the moment it sends the 101.
//
// JavaScript numbers are exact to 2^53, less than a run's message id
// (sender<<32 | counter): message_id travels as a string.
type socketioWire struct {
	nsp  string // the namespace, "" for the main one ("/")
	pong []byte // the answer to the server's ping
}

// socketioEvent is the event name of chat messages, both ways.
const socketioEvent = "chat"

func newSocketIOWire(namespace string) socketioWire {
	ns := strings.TrimPrefix(namespace, "/")
	if ns != "" {
		ns = "/" + ns
	}
	return socketioWire{nsp: ns, pong: []byte("3")}
}

func (socketioWire) offer() string { return "" }

// path is the URL's path ("/socket.io/" when it has none) with the query
// that opens an Engine.IO v4 WebSocket session.
func (socketioWire) path(t target, _ *stepPlan, _ int) string {
	p, q, _ := strings.Cut(t.path, "?")
	if p == "/" {
		p = "/socket.io/"
	}
	if q != "" {
		q += "&"
	}
	return p + "?" + q + "EIO=4&transport=websocket"
}

func (socketioWire) start() startMode { return startHello }

// appendNsp appends the namespace part of a packet.
func (w socketioWire) appendNsp(dst []byte) []byte {
	if w.nsp == "" {
		return dst
	}
	dst = append(dst, w.nsp...)
	return append(dst, ',')
}

func (w socketioWire) appendHello(dst []byte) []byte {
	return w.appendNsp(append(dst, "40"...))
}

func (w socketioWire) appendJoin(dst []byte, p *stepPlan, room int32, id int) []byte {
	dst = w.appendNsp(append(dst, "42"...))
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, `["join","`...)
	dst = append(dst, p.roomPre...)
	dst = strconv.AppendInt(dst, int64(room), 10)
	return append(dst, `"]`...)
}

func (w socketioWire) appendMessage(dst []byte, p *stepPlan, room int32, sender uint64, counter uint32, due int64, text string) []byte {
	dst = w.appendNsp(append(dst, "42"...))
	dst = append(dst, `["`+socketioEvent+`",{"room":"`...)
	dst = append(dst, p.roomPre...)
	dst = strconv.AppendInt(dst, int64(room), 10)
	dst = append(dst, `","message_id":"`...)
	dst = strconv.AppendUint(dst, sender<<32|uint64(counter), 10)
	dst = append(dst, `","due_us":`...)
	dst = strconv.AppendInt(dst, due, 10)
	dst = append(dst, `,"text":"`...)
	dst = append(dst, text...)
	return append(dst, `"}]`...)
}

// decode reads one Engine.IO packet.
func (w socketioWire) decode(p []byte, in []inbound) []inbound {
	if len(p) == 0 {
		return append(in, inbound{kind: inInvalid})
	}
	switch p[0] {
	case '0', '1', '3', '6': // open, close (the WebSocket's close follows), pong, noop
		return append(in, inbound{kind: inOther})
	case '2':
		if len(p) == 1 {
			return append(in, inbound{kind: inPing, text: w.pong})
		}
		return append(in, inbound{kind: inPing, text: append([]byte{'3'}, p[1:]...)})
	case '4':
		return append(in, w.packet(p[1:]))
	}
	return append(in, inbound{kind: inInvalid})
}

// packet reads one Socket.IO packet.
func (w socketioWire) packet(b []byte) inbound {
	if len(b) == 0 {
		return inbound{kind: inInvalid}
	}
	typ, i := b[0], 1
	if typ == '5' || typ == '6' { // binary event or ack: "N-" attachments
		j := bytes.IndexByte(b, '-')
		if j < 0 {
			return inbound{kind: inInvalid}
		}
		i = j + 1
	}
	nsp := ""
	if i < len(b) && b[i] == '/' {
		j := bytes.IndexByte(b[i:], ',')
		if j < 0 {
			j = len(b) - i
		}
		nsp, i = string(b[i:i+j]), min(i+j+1, len(b))
	}
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	id, hasID := parseUint(b[i:j])
	data := b[j:]
	if nsp != w.nsp && !(nsp == "/" && w.nsp == "") {
		return inbound{kind: inOther} // another namespace's: not this client's
	}
	switch typ {
	case '0':
		return inbound{kind: inHello}
	case '1':
		return inbound{kind: inError, text: b}
	case '2':
		return w.event(data)
	case '3':
		if !hasID {
			return inbound{kind: inInvalid}
		}
		return inbound{kind: inJoined, reqID: id}
	case '4':
		return inbound{kind: inError, text: data}
	case '5', '6':
		return inbound{kind: inOther}
	}
	return inbound{kind: inInvalid}
}

// event reads ["chat", {room, message_id, due_us, text}]; other events are
// not the run's.
func (w socketioWire) event(b []byte) inbound {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return inbound{kind: inInvalid}
	}
	i = skipWS(b, i+1)
	if i >= len(b) || b[i] != '"' {
		return inbound{kind: inInvalid}
	}
	e := stringEnd(b, i)
	if e < 0 {
		return inbound{kind: inInvalid}
	}
	if string(b[i+1:e]) != socketioEvent {
		return inbound{kind: inOther}
	}
	i = skipWS(b, e+1)
	if i >= len(b) || b[i] != ',' {
		return inbound{kind: inMessage} // a chat event without a payload: unexpected
	}
	i = skipWS(b, i+1)
	end := skipNested(b, i)
	var f frameFields
	if i >= len(b) || b[i] != '{' || end < 0 || !parseFields(b[i:end], &f) {
		return inbound{kind: inMessage}
	}
	x := inbound{kind: inMessage, room: f.room}
	x.idFields(&f)
	return x
}
