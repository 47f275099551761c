//go:build linux

package server

import (
	"errors"
	"fmt"
	"slices"

	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/room"
	"github.com/scalechat/scalechat/internal/ws"
)

// A connection's rooms: joining (with the join hook's and the token's
// checks), leaving, and the membership list its frames look rooms up in.

func (c *conn) membershipOf(name []byte) int {
	for i := range c.rooms {
		if c.rooms[i].room.Name() == string(name) {
			return i
		}
	}
	return -1
}

func (c *conn) onJoin(f *protocol.Frame) {
	if c.membershipOf(f.Room) >= 0 || c.isWaiting(f.Room) {
		c.sendError("already_joined", "already a member of this room", f)
		return
	}
	if len(c.rooms)+len(c.waiting) >= c.loop.srv.cfg.MaxRoomsPerConn {
		c.sendError("too_many_rooms", c.loop.roomsMessage, f)
		return
	}
	if !c.mayJoin(f) {
		return
	}
	rs := room.Resume{Since: f.Since, HasSince: f.HasSince, Epoch: string(f.Epoch)}
	if c.loop.srv.joinHook(string(f.Room)) {
		c.joinHooked(f, rs)
		return
	}
	c.join(f.Room, rs, false)
}

// mayJoin checks what every join of a room must pass, whoever asks for it
// (a join frame, the connect hook's rooms): the token's rooms claim and the
// room's namespace. It tells the client why not and returns false.
func (c *conn) mayJoin(f *protocol.Frame) bool {
	if c.limitRooms && !slices.Contains(c.allowed, string(f.Room)) {
		c.loop.stats.dropped[DropForbidden].Add(1)
		c.sendError("forbidden", "the token does not allow this room", f)
		return false
	}
	if err := c.loop.srv.admitRoom(string(f.Room), c.allowed, c.limitRooms); err != nil {
		c.loop.stats.dropped[DropForbidden].Add(1)
		code := "forbidden"
		if errors.Is(err, errUnknownNamespace) {
			code = protocol.CodeInvalidRoom
		}
		c.sendError(code, err.Error(), f)
		return false
	}
	return true
}

// hookIdentity is who c is in its join and publish calls: user, verified,
// or name, the client's own, never both.
func (c *conn) hookIdentity() (user, name string) {
	if c.sender != "" {
		return c.sender, ""
	}
	return "", c.user
}

func (c *conn) isWaiting(name []byte) bool {
	for _, w := range c.waiting {
		if w == string(name) {
			return true
		}
	}
	return false
}

func (c *conn) onLeave(f *protocol.Frame) {
	i := c.membershipOf(f.Room)
	if i < 0 {
		c.sendError("not_joined", "not a member of this room", f)
		return
	}
	r := c.rooms[i].room
	seq := c.leave(i)
	c.enqueueControl(protocol.AppendLeft(c.loop.enc[:0], r.Name(), seq))
}

// join makes c a member of the room called name and queues the joined
// frame and the history replay. In a cluster the room may first have to
// load from the broker: c then waits, and the loop joins it again when the
// room is ready. url says the room is the one of the connection's URL.
func (c *conn) join(name []byte, rs room.Resume, url bool) {
	l := c.loop
	r, res := l.srv.hub.Join(name, l.id, rs, l.hist[:0])
	if res.Full {
		l.stats.dropped[DropForbidden].Add(1)
		if url {
			c.closeWith(ws.CloseTryAgainLater, "this server holds as many rooms as it may")
			return
		}
		c.sendError("rooms_full", "this server holds as many rooms as it may", &l.frame)
		return
	}
	if res.MembersFull {
		l.stats.dropped[DropRoomFull].Add(1)
		msg := fmt.Sprintf("the room is full: its namespace allows %d members", r.Options().MaxMembers)
		if url {
			c.closeWith(ws.ClosePolicyViolation, msg)
			return
		}
		c.sendError(codeRoomFull, msg, &l.frame)
		return
	}
	if res.Unavailable {
		l.stats.dropped[DropUnavailable].Add(1)
		const msg = "the cluster's message store is unreachable, this room's stream cannot be checked: resume later"
		if url {
			c.closeWith(ws.CloseTryAgainLater, msg)
			return
		}
		c.sendError(protocol.CodeUnavailable, msg, &l.frame)
		return
	}
	if res.Pending {
		c.waiting = append(c.waiting, r.Name())
		l.pending[r] = append(l.pending[r], pendingJoin{c: c, rs: rs, url: url})
		if url {
			c.holdWhileLoading(r.Name())
		}
		return
	}
	l.hist = res.History
	lr := l.rooms[r]
	if lr == nil {
		lr = &localRoom{}
		l.rooms[r] = lr
	}
	lr.members = append(lr.members, member{c: c, minSeq: res.Seq})
	c.rooms = append(c.rooms, membership{room: r, local: lr, idx: len(lr.members) - 1})
	r.AddUser(c.user)
	if url {
		c.urlRoom = r
	}
	c.enqueueControl(protocol.AppendJoined(l.enc[:0], r.Name(), res.Epoch, res.Seq, res.Members, len(res.History), l.srv.connID(c.id)))
	if res.Gap {
		c.enqueueControl(protocol.AppendHistoryGap(l.enc[:0], r.Name(), rs.Since, res.FirstSeq, res.Reset))
	}
	for i := range res.History {
		c.enqueueShared(c.frameOf(&res.History[i]))
	}
	clear(l.hist)
	if url {
		c.releaseHeld()
	}
}

// leave removes c from c.rooms[i] and returns the room's latest seq.
func (c *conn) leave(i int) uint64 {
	m := c.rooms[i]
	lr := m.local
	last := len(lr.members) - 1
	if m.idx != last {
		moved := lr.members[last]
		lr.members[m.idx] = moved
		for j := range moved.c.rooms {
			if moved.c.rooms[j].local == lr {
				moved.c.rooms[j].idx = m.idx
				break
			}
		}
	}
	lr.members[last] = member{}
	lr.members = lr.members[:last]
	if len(lr.members) == 0 {
		delete(c.loop.rooms, m.room)
	}
	if c.urlRoom == m.room {
		c.urlRoom = nil
	}
	lastRoom := len(c.rooms) - 1
	c.rooms[i] = c.rooms[lastRoom]
	c.rooms[lastRoom] = membership{}
	c.rooms = c.rooms[:lastRoom]
	if len(c.rooms) == 0 {
		c.rooms = nil
	}
	m.room.RemoveUser(c.user)
	return m.room.Leave(c.loop.id)
}

func (c *conn) leaveAll() {
	for len(c.rooms) > 0 {
		c.leave(len(c.rooms) - 1)
	}
}
