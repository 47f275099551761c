package capacity

import (
	"fmt"
	"math"
	"slices"
)

// Figure is one measured cost the model starts from, with where it came
// from.
type Figure struct {
	Key    string  // what the model calls it (the keys below)
	Value  float64 // in Unit
	Unit   string
	Source string // the results file, with its build, machine and date
	// Rate is the deliveries per second of the run, for the µs per
	// delivery figures: the model needs how busy the core was. 0: the
	// file did not record it, and the bench's planned rate is taken.
	Rate float64
}

// The figures the model needs.
const (
	KeyBusySmall  = "busy_small_rooms"  // µs per delivery, rooms of 4, one core busy (bench "rooms 2500×4")
	KeyLightSmall = "light_small_rooms" // µs per delivery, rooms of 4, one core lightly loaded (bench "cluster 500×4: 1 node", 500×4)
	KeyBigRoom    = "big_room"          // µs per delivery, one room of 200 (bench "oneroom n=200")
	KeyMidRooms   = "mid_rooms"         // µs per delivery, rooms of 10, one core lightly loaded (bench "compression 256 B off", 200×10)
	KeyIdleKiB    = "idle_kib"          // KiB of server RSS per idle connection (bench "idle")
	KeyConnectUS  = "connect_us"        // µs of server CPU per client that connects, sends one message and closes (bench "transports", websocket)
	KeySplitRatio = "split_ratio"       // node CPU per delivery, rooms of 4 split over 2 nodes ÷ one node alone
	KeySplitRedis = "split_redis_us"    // Redis µs per delivery, rooms of 4 split over 2 nodes
	KeyOwnedRatio = "owned_ratio"       // node CPU per delivery, rooms of 4 all on node A of 2 ÷ one node alone
	KeyOwnedRedis = "owned_redis_us"    // Redis µs per delivery, rooms of 4 all on node A of 2
	// Of a cluster on NATS (bench cluster's rows "… on NATS …", engine
	// nats), when a results file has them: nats-server's µs per delivery.
	KeySplitNATS = "split_nats_us" // rooms of 4 split over 2 nodes on NATS
	KeyOwnedNATS = "owned_nats_us" // rooms of 4 all on node A of 2 on NATS
)

// figureKeys are the figures in the order the model takes and prints
// them, with their units.
func figureKeys() []struct{ key, unit string } {
	return []struct{ key, unit string }{
		{KeyBusySmall, "µs/delivery"}, {KeyLightSmall, "µs/delivery"}, {KeyBigRoom, "µs/delivery"}, {KeyMidRooms, "µs/delivery"},
		{KeyIdleKiB, "KiB/connection"}, {KeyConnectUS, "µs/client"},
		{KeySplitRatio, "×"}, {KeySplitRedis, "µs/delivery"}, {KeyOwnedRatio, "×"}, {KeyOwnedRedis, "µs/delivery"},
	}
}

// natsKeys are the figures of a cluster on NATS: not needed (the
// committed results may lack them); with them the plan sizes nats-server
// beside Redis. The split rooms' alone do (bounding the others'), the
// others' alone do not.
func natsKeys() []struct{ key, unit string } {
	return []struct{ key, unit string }{{KeySplitNATS, "µs/delivery"}, {KeyOwnedNATS, "µs/delivery"}}
}

// The deliveries per second the bench plans for its rows, which the
// derivation needs (how busy the core was) where a file did not record
// the rate measured.
const (
	busySmallRate  = 40000 // deliveries per second of "rooms 2500×4"
	lightSmallRate = 8000  // of "cluster 500×4: 1 node" (500 × 4)
	bigRoomRate    = 40000 // of "oneroom n=200"
	midRoomsRate   = 20000 // of "compression 256 B off" (200 × 10)
	smallRoom      = 4     // members of the rooms of "rooms" and of the cluster's first traffic
	midRoom        = 10    // members of the rooms of "compression"
	bigRoom        = 200   // members of "oneroom n=200"
)

// Every bench row the costs come from sends 1 message per second per
// client, so a connection receives as many frames per second as its room
// has members. The frames a connection gets per second decide whether its
// deliveries share a writev (see Costs.Delivery).
const (
	unbatchedFrames = midRoom // up to this many frames/s per connection, each delivery is a writev of its own
	batchedFrames   = bigRoom // at this many, the big room's cost per delivery
)

// Costs are the model's unit costs, derived from the figures.
type Costs struct {
	// One node, per core (one event loop), in µs of CPU:
	PerMessage  float64 // reading, parsing and publishing a message, on a busy loop
	PerDelivery float64 // queuing a frame to one member and writing it in a writev of its own
	// PerBatched is a delivery's cost when its connection gets many frames
	// per loop pass and they share a writev: the one room of 200, whose
	// members each get 200 frames a second.
	PerBatched float64
	WakeUp     float64 // per message, times the share of time the loop is idle: waking it up
	// A cluster, extra per message, all nodes together and Redis:
	SplitNode, SplitRedis float64 // a room with members on several nodes
	OwnedNode, OwnedRedis float64 // a room whose members are all on one node (the node-local fast path)
	ConnectUS             float64 // server CPU per connect (upgrade, join, one message, close)
	IdleBytes             float64 // server RSS per idle connection
	// On NATS instead of Redis, extra per message in nats-server, when
	// NATS is set (the figures had the NATS rows); the nodes' own extra
	// is taken from the rows on Redis.
	NATS                 bool
	SplitNATS, OwnedNATS float64
	Figures              []Figure
}

// Derive computes the unit costs from the figures. A key given more than
// once (several runs of one bench row) counts with the median of its
// values.
//
// CPU per message on one core is modelled as
//
//	m + s·d(f) + w·(1 − u)
//
// for a room of s members on a loop busy a share u of the time, whose
// connections each receive f frames a second: m reads and publishes the
// message, d(f) queues and writes one delivery, and w is what waking an
// idle loop for a message costs (a busy loop finds several messages per
// wake-up and pays it for none). A delivery costs most when it is the only
// frame its connection gets in a loop pass, a writev of its own (strace
// of serve: 0.95 writev per delivery in rooms of 10 at 1 msg/s, 0.5 in one
// room of 200): d(f) is d up to 10 frames/s per connection, the big room's
// d_b from 200 on, and between the two it goes from one to the other in
// log f. Rooms of 4 at two loads give w and m + 4d; rooms of 10 give
// m + 10d, so m and d; one room of 200 then gives d_b. A cluster's extra
// cost is per message: (ratio − 1) × the light small rooms' µs per
// delivery × 4 on the nodes, and Redis µs per delivery × 4 in Redis (on
// NATS, when the figures have it: nats-server's µs per delivery × 4).
func Derive(figs []Figure) (Costs, error) {
	vs, rs := map[string][]float64{}, map[string][]float64{}
	for _, f := range figs {
		if f.Value <= 0 {
			return Costs{}, fmt.Errorf("the figure %s is %g %s, not a measurement", f.Key, f.Value, f.Unit)
		}
		vs[f.Key] = append(vs[f.Key], f.Value)
		if f.Rate > 0 {
			rs[f.Key] = append(rs[f.Key], f.Rate)
		}
	}
	v := map[string]float64{}
	for k, x := range vs {
		v[k] = median(x)
	}
	rates := map[string]float64{KeyBusySmall: busySmallRate, KeyLightSmall: lightSmallRate, KeyBigRoom: bigRoomRate, KeyMidRooms: midRoomsRate}
	for k, x := range rs {
		rates[k] = median(x)
	}
	for _, k := range []string{KeyBusySmall, KeyLightSmall, KeyMidRooms, KeyBigRoom, KeyIdleKiB, KeyConnectUS, KeySplitRatio, KeySplitRedis, KeyOwnedRatio, KeyOwnedRedis} {
		if _, ok := v[k]; !ok {
			return Costs{}, fmt.Errorf("the figure %s is missing", k)
		}
	}
	// Per message and the loop's busy share, at each measured shape.
	perMsg := func(k string, size float64) (float64, float64) { return size * v[k], rates[k] * v[k] / 1e6 }
	busyMsg, busyU := perMsg(KeyBusySmall, smallRoom)
	lightMsg, lightU := perMsg(KeyLightSmall, smallRoom)
	midMsg, midU := perMsg(KeyMidRooms, midRoom)
	bigMsg, bigU := perMsg(KeyBigRoom, bigRoom)
	if busyU <= lightU || busyU >= 1 {
		return Costs{}, fmt.Errorf("the busy rooms of 4 kept the core busy %.0f%% of the time, the light ones %.0f%%: the figures cannot give the cost of a wake-up", 100*busyU, 100*lightU)
	}
	c := Costs{Figures: figs}
	c.WakeUp = (lightMsg - busyMsg) / (busyU - lightU)
	if c.WakeUp < 0 {
		// Light rooms cheaper than busy ones: no wake-up cost to see.
		c.WakeUp = 0
	}
	smallFixed := busyMsg - c.WakeUp*(1-busyU) // m + 4d
	midFixed := midMsg - c.WakeUp*(1-midU)     // m + 10d
	bigFixed := bigMsg - c.WakeUp*(1-bigU)     // m + 200d_b
	c.PerDelivery = (midFixed - smallFixed) / (midRoom - smallRoom)
	c.PerMessage = smallFixed - smallRoom*c.PerDelivery
	c.PerBatched = (bigFixed - c.PerMessage) / bigRoom
	if c.PerDelivery <= 0 || c.PerMessage < 0 || c.PerBatched <= 0 {
		return Costs{}, fmt.Errorf("the figures give %.2f µs per message and %.2f µs per delivery (%.2f in one big room): they do not fit the model (a noisy run? repeat the bench)",
			c.PerMessage, c.PerDelivery, c.PerBatched)
	}
	ref := smallRoom * v[KeyLightSmall] // µs per message of rooms of 4 on one node in the cluster bench's traffic
	c.SplitNode = (v[KeySplitRatio] - 1) * ref
	c.OwnedNode = max(v[KeyOwnedRatio]-1, 0) * ref
	c.SplitRedis = smallRoom * v[KeySplitRedis]
	c.OwnedRedis = smallRoom * v[KeyOwnedRedis]
	_, split := v[KeySplitNATS]
	_, owned := v[KeyOwnedNATS]
	switch {
	case split && owned:
		c.NATS, c.SplitNATS, c.OwnedNATS = true, smallRoom*v[KeySplitNATS], smallRoom*v[KeyOwnedNATS]
	case split:
		// Rooms on one node cost nats-server too little CPU to read in
		// a short run: the split rooms' cost bounds it.
		c.NATS, c.SplitNATS, c.OwnedNATS = true, smallRoom*v[KeySplitNATS], smallRoom*v[KeySplitNATS]
		c.Figures = append(slices.Clone(figs), Figure{Key: KeyOwnedNATS, Value: v[KeySplitNATS], Unit: "µs/delivery",
			Source: "not measured (no row of rooms on A on NATS had it): " + KeySplitNATS + " taken, an upper bound"})
	case owned:
		return Costs{}, fmt.Errorf("the figure %s is missing (%s is there: scalechat bench cluster's rows on NATS give both)", KeySplitNATS, KeyOwnedNATS)
	}
	c.ConnectUS = v[KeyConnectUS]
	c.IdleBytes = v[KeyIdleKiB] * 1024
	return c, nil
}

// Delivery is the µs of CPU of one delivery to a connection that receives
// frames frames a second: d up to 10, the big room's d_b from 200 on, and
// in between from one to the other in log frames.
func (c Costs) Delivery(frames float64) float64 {
	switch {
	case frames <= unbatchedFrames:
		return c.PerDelivery
	case frames >= batchedFrames:
		return c.PerBatched
	}
	t := math.Log(frames/unbatchedFrames) / math.Log(batchedFrames/unbatchedFrames)
	return c.PerDelivery + t*(c.PerBatched-c.PerDelivery)
}

// NodeCPU is the CPU, in cores, that one node's loops spend on msgs
// messages per second into rooms of size members whose connections each
// receive frames frames a second, spread over cores cores, without the
// cluster's extra: the model's m + s·d(f) + w·(1 − u) solved for
// u = cpu ÷ cores.
func (c Costs) NodeCPU(msgs, size, frames, cores float64) float64 {
	a := msgs * (c.PerMessage + size*c.Delivery(frames)) / 1e6
	b := msgs * c.WakeUp / 1e6
	cpu := (a + b) / (1 + b/cores)
	if cpu > cores {
		// Loops busy all the time: no wake-ups, and more work than cores.
		return a
	}
	return cpu
}
