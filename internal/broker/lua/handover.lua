-- handover.lua: an owner that frees a room its followers still have hands
-- it to one of them (Config.OwnerOrder, redis_follow.go): the holder moves
-- from this node to the new owner, the seq counter is at least the owner's
-- last seq, and the new owner and the other followers are told on their
-- node channels. Redis runs this after every command the owner sent
-- before it, so each node is told after the last message the old owner
-- sent it.
--
-- KEYS[1..5] as persist.lua: seq, history, epoch, holder, set of nodes
-- ARGV[1] the owning node
-- ARGV[2] the new owner
-- ARGV[3] TTL in seconds
-- ARGV[4] the room's last seq on the owning node
-- ARGV[5] the new owner's channel
-- ARGV[6] its payload (an O record)
-- then pairs: another follower's channel and its payload (a W record).
-- On a Redis Cluster ARGV ends at ARGV[4]: the channels are in other slots,
-- and the owner sends the records itself once this answered.
--
-- Returns 1, or 0 (telling nobody) when the node no longer held the room:
-- it was taken over.
if redis.call('GET', KEYS[4]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[4], ARGV[2], 'EX', ARGV[3])
if tonumber(ARGV[4]) > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], ARGV[4], 'EX', ARGV[3])
end
for i = 5, #ARGV, 2 do
  redis.call('PUBLISH', ARGV[i], ARGV[i+1])
end
return 1
