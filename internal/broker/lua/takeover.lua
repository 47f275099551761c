-- takeover.lua: takes a room over from a holder whose lease is gone (the
-- caller checked): a new epoch, no holder, the holder out of the room's
-- set of nodes. Nothing changes when the holder is no longer the one seen.
--
-- KEYS[1..5] as persist.lua: seq, history, epoch, holder, set of nodes
-- ARGV[1] the holder seen
-- ARGV[2] the new epoch
-- ARGV[3] TTL in seconds
--
-- Returns 1.
if redis.call('GET', KEYS[4]) == ARGV[1] then
  redis.call('DEL', KEYS[4])
  redis.call('SREM', KEYS[5], ARGV[1])
  redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[3])
end
return 1
