-- release.lua: gives up a room no other node follows: the seq counter at
-- least the owner's last seq, and the holder deleted, so that the next node
-- to load the room claims it and loads it from Redis.
--
-- KEYS[1..5] as persist.lua: seq, history, epoch, holder, set of nodes
-- ARGV[1] the owning node
-- ARGV[2] the room's last seq on that node
-- ARGV[3] TTL in seconds
--
-- Returns 1, or 0 when the node no longer held the room: it was taken over.
local held = 0
if redis.call('GET', KEYS[4]) == ARGV[1] then
  held = 1
  redis.call('DEL', KEYS[4])
  if tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[1]) or '0') then
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  end
end
return held
