package broker

// reply is what the cluster's store answered one call of a round (a
// persist, release, presence, send, handover or fill: the jobs of
// redis_publisher.go), read from the engine's own answer (Redis:
// Redis.replyOf) so that what the owner protocol does next (settle) does
// not depend on how the engine said it: the seam a second engine's rounds
// answer through (docs/nats.md, step 3).
type reply struct {
	err  error  // the call failed, or its answer could not be read
	held []bool // jobPersist: per room of the call, whether this node still held it (else another node took it over)
	ok   bool   // jobRelease, jobHandover: the room was still held here; jobSend: some node listened
	n    int64  // jobFill: how many messages it wrote
}

// settle does what the replies to a round's calls ask of the owner
// protocol: a room taken over meanwhile is lost here, a send nobody heard
// is sent again to the room's holder of the moment (and its node checked),
// a failure is an outage.
func (b *Redis) settle(batch []job, calls []call, replies []reply) {
	unheard := map[string]bool{} // nodes nobody listens for: their channel's PUBLISH reached no one
	for k, c := range calls {
		r := replies[k]
		j := batch[c.js[0]]
		switch {
		case j.kind == jobPersist:
			b.settlePersists(c.rooms, r)
		case r.err != nil && j.kind == jobSend:
			b.fail("send to a node", r.err)
			b.sendFailed(batch, c.js)
		case j.kind == jobFill:
			b.settleFill(j, r)
		case r.err != nil:
			b.fail("store", r.err)
		case j.kind == jobRelease:
			if !r.ok {
				b.lostRoom(j.room) // taken over meanwhile: what was ordered here is not the room's stream
			}
		case j.kind == jobSend:
			if !r.ok {
				unheard[j.node] = true
				b.sendUnheard(batch, c.js)
			}
		case j.kind == jobHandover:
			if !r.ok {
				b.log.Warn("an owned room was taken over before it was handed on", "room", j.room)
			} else if b.cluster != nil {
				b.tellHandover(j) // the script could not: another slot's channels
			}
		}
	}
	for node := range unheard {
		b.unheard(node)
	}
}

// settlePersists hands each room of a persist call its answer r: a room
// another node took over meanwhile is dropped here. When the store did not
// answer, the messages were delivered here already; its history misses
// them, and the outage is handled as any other.
func (b *Redis) settlePersists(rooms []string, r reply) {
	if r.err != nil {
		b.fail("store", r.err)
	}
	for n, room := range rooms {
		switch {
		case r.err != nil:
			b.sub.renewFailed(room) // its TTLs may not have been renewed
		case !r.held[n]:
			b.sub.renewFailed(room)
			b.lostRoom(room)
		}
	}
}
