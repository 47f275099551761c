package analyze

// msgTable is the hash join's build side: an open-addressing hash table
// (linear probing, backward-shift deletion, no tombstones) from a message
// (sender_id, message_id) to its Sent facts. A hand-written table instead of
// a Go map because the probe returns a pointer to the slot, so a Received row
// costs one probe, not a lookup plus a store, and entries hold no pointers
// for the garbage collector to scan.
type msgTable struct {
	slots []msgEntry
	mask  uint64
	n     int
}

type msgEntry struct {
	sender, msg uint64
	due         int64
	sr, step    uint32
	recv        uint32
	used        uint32
}

func newMsgTable() *msgTable {
	const initial = 1 << 12
	return &msgTable{slots: make([]msgEntry, initial), mask: initial - 1}
}

// hashKey mixes a message key; partition selection uses the high 32 bits and the
// table index the low bits, so that the two stay independent.
func hashKey(sender, msg uint64) uint64 {
	h := sender*0x9E3779B97F4A7C15 ^ (msg+0x632BE59BD9B4E019)*0xC2B2AE3D27D4EB4F
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h
}

// get returns the entry of the key, or nil.
func (t *msgTable) get(sender, msg uint64) *msgEntry {
	i := hashKey(sender, msg) & t.mask
	for {
		e := &t.slots[i]
		if e.used == 0 {
			return nil
		}
		if e.sender == sender && e.msg == msg {
			return e
		}
		i = (i + 1) & t.mask
	}
}

// insert returns the entry of the key, adding a zeroed one when absent;
// added says which.
func (t *msgTable) insert(sender, msg uint64) (e *msgEntry, added bool) {
	if uint64(t.n+1)*4 > uint64(len(t.slots))*3 {
		t.grow()
	}
	i := hashKey(sender, msg) & t.mask
	for {
		e := &t.slots[i]
		if e.used == 0 {
			*e = msgEntry{sender: sender, msg: msg, used: 1}
			t.n++
			return e, true
		}
		if e.sender == sender && e.msg == msg {
			return e, false
		}
		i = (i + 1) & t.mask
	}
}

// remove deletes the key if present, shifting later entries of its probe
// run back so that lookups never need tombstones.
func (t *msgTable) remove(sender, msg uint64) {
	i := hashKey(sender, msg) & t.mask
	for {
		e := &t.slots[i]
		if e.used == 0 {
			return
		}
		if e.sender == sender && e.msg == msg {
			break
		}
		i = (i + 1) & t.mask
	}
	t.n--
	for {
		t.slots[i] = msgEntry{}
		j := i
		for {
			j = (j + 1) & t.mask
			if t.slots[j].used == 0 {
				return
			}
			home := hashKey(t.slots[j].sender, t.slots[j].msg) & t.mask
			// Move slot j into the hole at i unless its home lies
			// cyclically in (i, j].
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				t.slots[i] = t.slots[j]
				i = j
				break
			}
		}
	}
}

func (t *msgTable) grow() {
	old := t.slots
	t.slots = make([]msgEntry, 2*len(old))
	t.mask = uint64(len(t.slots) - 1)
	for k := range old {
		e := &old[k]
		if e.used == 0 {
			continue
		}
		i := hashKey(e.sender, e.msg) & t.mask
		for t.slots[i].used != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = *e
	}
}

// len returns the number of entries.
func (t *msgTable) len() int { return t.n }
