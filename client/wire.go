package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// What the server sends, decoded into events.

// wire is every field of a server frame this client reads.
type wire struct {
	Type      string  `json:"type"`
	Room      string  `json:"room"`
	Seq       uint64  `json:"seq"`
	ServerAt  string  `json:"server_at"`
	MessageID *uint64 `json:"message_id"`
	Members   int     `json:"members"`
	History   int     `json:"history"`
	Epoch     string  `json:"epoch"`
	Since     uint64  `json:"since"`
	FirstSeq  uint64  `json:"first_seq"`
	Reset     bool    `json:"reset"`
	Code      string  `json:"code"`
	Message   string  `json:"message"`
	Users     []User  `json:"users"`
	Anonymous int     `json:"anonymous"`
	User      string  `json:"user"`
}

type wireChat struct {
	Room      string `json:"room"`
	Seq       uint64 `json:"seq"`
	ServerAt  string `json:"server_at"`
	MessageID uint64 `json:"message_id"`
	Text      string `json:"text"`
	Sender    string `json:"sender"`
	SentAt    string `json:"sent_at"`
}

// handle updates the client's state with one server frame and returns the
// event to deliver, nil for a duplicate or a frame of an unknown type.
func (c *Client) handle(data []byte) (Event, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("frame %.100q: %w", data, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if head.Type == "" {
		// A chat message: only the server's fields and the five of the
		// protocol are read, other fields (any type) are ignored.
		var w wireChat
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, fmt.Errorf("chat frame %.100q: %w", data, err)
		}
		return c.onMessage(&w), nil
	}
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%s frame %.100q: %w", head.Type, data, err)
	}
	switch w.Type {
	case "joined":
		r := c.room(w.Room)
		r.joinedSeq, r.replay, r.epoch = w.Seq, w.History, w.Epoch
		if !r.seen {
			// A new member: what came before the replay is not for it.
			r.seen, r.lastSeq = true, w.Seq-min(uint64(max(w.History, 0)), w.Seq)
		}
		if r.replay <= 0 {
			r.awaiting = false
		}
		return &Joined{Room: w.Room, Seq: w.Seq, Members: w.Members, History: w.History}, nil
	case "history_gap":
		r := c.room(w.Room)
		reset := w.Reset || w.Since > r.joinedSeq
		if w.FirstSeq > 0 {
			r.lastSeq = w.FirstSeq - 1
		} else {
			r.lastSeq = r.joinedSeq
		}
		r.seen = true
		return &HistoryGap{Room: w.Room, Since: w.Since, FirstSeq: w.FirstSeq, Reset: reset}, nil
	case "left":
		if r := c.rooms[w.Room]; r != nil {
			r.awaiting, r.replay = false, 0
		}
		return &Left{Room: w.Room, Seq: w.Seq}, nil
	case "presence":
		return &Presence{Room: w.Room, Members: w.Members, Users: w.Users, Anonymous: w.Anonymous}, nil
	case "presence_join", "presence_leave":
		return &PresenceChange{Room: w.Room, User: w.User, Joined: w.Type == "presence_join"}, nil
	case "error":
		e := &Error{Code: w.Code, Message: w.Message, Room: w.Room}
		if w.MessageID != nil {
			e.MessageID = *w.MessageID
		}
		if r := c.rooms[w.Room]; r != nil && (w.Code == "too_many_rooms" || w.Code == "invalid_room") {
			// A refused join: the client is not in the room.
			r.want, r.awaiting = false, false
		}
		return e, nil
	}
	return nil, nil // a newer server's frame: ignored, as the protocol asks
}

// postedRoom is the room a message without a room field went to.
func (c *Client) postedRoom(room string) string {
	if room == "" {
		return c.cfg.Room
	}
	return room
}

func (c *Client) onMessage(w *wireChat) Event {
	r := c.room(w.Room)
	if r.replay > 0 {
		r.replay--
		if r.replay == 0 {
			r.awaiting = false
		}
	}
	if r.seen && w.Seq <= r.lastSeq {
		return nil // already delivered
	}
	r.seen, r.lastSeq = true, w.Seq
	m := &Message{Room: w.Room, Seq: w.Seq, MessageID: w.MessageID, Text: w.Text, Sender: w.Sender, SentAt: w.SentAt}
	if t, err := time.Parse(time.RFC3339Nano, w.ServerAt); err == nil {
		m.ServerAt = t
	}
	if w.MessageID != 0 && w.Sender == c.cfg.Sender {
		_, m.Own = c.pending[pendingKey{room: w.Room, id: w.MessageID}]
	}
	return m
}

// confirm forgets the message that ev, once delivered, confirms or refuses.
// It comes after the delivery so that Flush returns once the echoes are in
// Events.
func (c *Client) confirm(ev Event) {
	var k pendingKey
	switch e := ev.(type) {
	case *Message:
		if !e.Own {
			return
		}
		k = pendingKey{room: e.Room, id: e.MessageID}
	case *Error:
		if e.MessageID == 0 {
			return
		}
		k = pendingKey{room: c.postedRoom(e.Room), id: e.MessageID}
	default:
		return
	}
	c.mu.Lock()
	c.removePending(k)
	c.mu.Unlock()
}
