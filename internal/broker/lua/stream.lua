-- stream.lua: checks, after an outage, that Redis still holds the room's
-- stream as this node knows it: the same epoch and a counter at or above
-- the node's seq. Else Redis lost the room (its keys are gone: a restart
-- without persistence) or some of its messages (a failover before they were
-- replicated), and seqs this node's members saw may be handed out again:
-- the room starts a new stream, unless another node started one already,
-- with the counter above every seq the node has.
--
-- KEYS[1] the room's seq counter
-- KEYS[2] its epoch
-- ARGV[1] the room's seq on this node
-- ARGV[2] TTL in seconds
-- ARGV[3] the room's epoch on this node
-- ARGV[4] a new epoch, for a new stream
--
-- Returns {counter, 0} for the same stream, {counter, 1} for another one.
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
local e = redis.call('GET', KEYS[2])
local cur = tonumber(ARGV[1])
if e == ARGV[3] and c >= cur then
  return {c, 0}
end
if cur > c then
  c = cur
  redis.call('SET', KEYS[1], c, 'EX', ARGV[2])
end
if e == false or e == ARGV[3] then
  redis.call('SET', KEYS[2], ARGV[4], 'EX', ARGV[2])
end
return {c, 1}
