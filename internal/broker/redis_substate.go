package broker

import "time"

// The state of the rooms subscribed here, read and changed by what each
// step of the broker needs: these are subscriptions' only methods besides
// those of the queue and the waits (redis_subscribe.go), so that its lock
// is taken by its own methods alone, each step under one acquisition.

// count returns how many rooms are subscribed here.
func (s *subscriptions) count() int { return int(s.n.Load()) }

// config returns the room's RoomConfig as resolved when it was subscribed,
// and whether it is subscribed.
func (s *subscriptions) config(room string) (RoomConfig, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.rooms[room]; st != nil {
		return st.rc, true
	}
	return RoomConfig{}, false
}

// subscribed reports whether the room is subscribed here and not leaving.
func (s *subscriptions) subscribed(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.rooms[room]
	return st != nil && !st.leaving
}

// stillSubscribed reports whether st is still the room's state (not
// unsubscribed, nor subscribed again since) and the room is not leaving.
func (s *subscriptions) stillSubscribed(room string, st *roomState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rooms[room] == st && !st.leaving
}

// synced returns the rooms subscribed here and loaded from Redis (not
// those loaded while it was down, nor those leaving).
func (s *subscriptions) synced() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rooms := make([]string, 0, len(s.rooms))
	for name, st := range s.rooms {
		if !st.unsynced && !st.leaving {
			rooms = append(rooms, name)
		}
	}
	return rooms
}

// leave marks the room leaving (Unsubscribe was called): a holding on its
// way (a handover to this node) is given back.
func (s *subscriptions) leave(room string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.rooms[room]; st != nil {
		st.leaving = true
	}
}

// add subscribes the room with state st; it returns the connection the
// state it replaces was subscribed on (nil: none).
func (s *subscriptions) add(room string, st *roomState) (oldConn *pubsub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldConn = s.rooms[room].conn()
	s.rooms[room] = st
	s.n.Store(int64(len(s.rooms)))
	return oldConn
}

// remove forgets the room, and stops keeping its keys alive; it returns
// the connection it was subscribed on (nil: none).
func (s *subscriptions) remove(room string) (oldConn *pubsub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldConn = s.rooms[room].conn()
	delete(s.rooms, room)
	s.n.Store(int64(len(s.rooms)))
	s.kept.remove(room)
	return oldConn
}

// conn is the connection st's room is subscribed on; nil for a nil st.
// The caller holds subscriptions.mu.
func (st *roomState) conn() *pubsub {
	if st == nil {
		return nil
	}
	return st.ps
}

// setConn records the connection the room is subscribed on.
func (s *subscriptions) setConn(room string, ps *pubsub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.rooms[room]; st != nil {
		st.ps = ps
	}
}

// detach forgets ps, a broken connection, as the connection of every room
// subscribed on it.
func (s *subscriptions) detach(ps *pubsub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.rooms {
		if st.ps == ps {
			st.ps = nil
		}
	}
}

// confirmation is what Redis's answer to a room's (un)subscription found.
type confirmation struct {
	known     bool // the room is subscribed here
	confirmed bool // its subscription was confirmed before this answer
	ours      bool // the answer came on the connection the room is subscribed on
}

// confirm looks the room up for an answer that came on ps; when subscribe,
// the answer confirms the room's subscription (closes its confirmed).
func (s *subscriptions) confirm(room string, ps *pubsub, subscribe bool) confirmation {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.rooms[room]
	if st == nil {
		return confirmation{}
	}
	c := confirmation{known: true, confirmed: isClosed(st.confirmed), ours: st.ps == ps}
	if subscribe && !c.confirmed {
		close(st.confirmed)
	}
	return c
}

// confirmations returns the channels closed when each of rooms' current
// subscriptions is confirmed.
func (s *subscriptions) confirmations(rooms map[string]*roomState) []chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	waits := make([]chan struct{}, 0, len(rooms))
	for _, st := range rooms {
		waits = append(waits, st.confirmed)
	}
	return waits
}

// unplace detaches every room that is not subscribed, and confirmed, on
// the live connection (live) of the master that serves it now (master), so
// that it is subscribed again: it returns those rooms, a channel closed
// when each new subscription is confirmed, and per live connection the
// rooms to unsubscribe from it. The caller holds shardConns.mu, which live
// and master read.
func (s *subscriptions) unplace(live func(*pubsub) bool, master func(room string) string) (moved []string, waits []chan struct{}, left map[*pubsub][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	left = map[*pubsub][]string{}
	for name, st := range s.rooms {
		if st.ps != nil && live(st.ps) && master(name) == st.ps.addr && isClosed(st.confirmed) {
			continue // subscribed, and confirmed, where it lives
		}
		if st.ps != nil && live(st.ps) {
			left[st.ps] = append(left[st.ps], name)
		}
		st.ps = nil
		if isClosed(st.confirmed) { // a new wait for the new subscription
			st.confirmed = make(chan struct{})
		}
		waits = append(waits, st.confirmed)
		moved = append(moved, name)
	}
	return moved, waits, left
}

// markUnsynced records that st's room was loaded while Redis was down: its
// local seqs are not Redis's.
func (s *subscriptions) markUnsynced(st *roomState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.unsynced = true
}

// keepAlive keeps the room's keys alive from now when st is still its
// state (the room was not unsubscribed while it loaded).
func (s *subscriptions) keepAlive(room string, st *roomState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rooms[room] == st {
		s.kept.add(room, st.rc.TTL, time.Now())
	}
}

// dueKept returns the kept rooms due at now, due again a renewInterval
// later, and how long until the next look. It reads the rooms keptChunk at
// a time, each chunk under its own acquisition.
func (s *subscriptions) dueKept(now time.Time) ([]keptRoom, time.Duration) {
	l := newKeptLook(now)
	for more := true; more; {
		s.mu.Lock()
		more = s.kept.look(&l, keptChunk)
		s.mu.Unlock()
	}
	return l.due, l.nextLook()
}

// keptFailed makes rooms due again at once: Redis did not answer their
// renewal.
func (s *subscriptions) keptFailed(rooms []keptRoom) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept.failed(rooms)
}

// renewDue reports whether a publish of the room now is to renew its TTLs
// in Redis (this node has not renewed them for renewInterval; due, it is
// recorded as renewed now) and the room's RoomConfig; ok is false when the
// room is not subscribed here.
func (s *subscriptions) renewDue(room string, now time.Time) (due bool, rc RoomConfig, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.rooms[room]
	if st == nil {
		return false, RoomConfig{}, false
	}
	if !st.renewed.IsZero() && now.Sub(st.renewed) < renewInterval(st.rc.TTL) {
		return false, st.rc, true
	}
	st.renewed = now
	return true, st.rc, true
}

// renewFailed forgets a renewal whose publish Redis did not answer: the
// room's next publish renews its TTLs again.
func (s *subscriptions) renewFailed(room string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.rooms[room]; st != nil {
		st.renewed = time.Time{}
	}
}

// unsynced reports whether room was loaded while Redis was down (a stream
// of this node alone).
func (s *subscriptions) unsynced(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.rooms[room]
	return st != nil && st.unsynced
}
