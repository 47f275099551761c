-- publish.lua: gives a message its seq, stores it and publishes it, and
-- keeps the room's epoch alive as long as its seq; it grants the room to the
-- publishing node when that node alone has loaded it (the set of nodes).
--
-- KEYS[1] the room's seq counter
-- KEYS[2] its history stream
-- KEYS[3] its epoch
-- KEYS[4] its holder (the node that owns it)
-- KEYS[5] the set of nodes that loaded the room
-- ARGV[1] the message's JSON before the seq (prefix)
-- ARGV[2] the message's JSON after the seq (suffix)
-- ARGV[3] history size (0: keep none)
-- ARGV[4] TTL in seconds
-- ARGV[5] the room's channel
-- ARGV[6] "s" to publish on a shard channel (SPUBLISH), else "-"
-- ARGV[7] the publishing node
--
-- Returns {seq, 1 when the node owns the room, else 0}, or {0, -1} without
-- publishing when another node holds the room.
local holder = redis.call('GET', KEYS[4])
if holder and holder ~= ARGV[7] then
  return {0, -1} -- another node orders this room: not here
end
local seq = redis.call('INCR', KEYS[1])
local msg = ARGV[1] .. seq .. ARGV[2]
if tonumber(ARGV[3]) > 0 then
  redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], seq .. '-1', 'm', msg)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[4])
redis.call('EXPIRE', KEYS[5], ARGV[4])
if ARGV[6] == 's' then
  redis.call('SPUBLISH', ARGV[5], seq .. ' ' .. msg)
else
  redis.call('PUBLISH', ARGV[5], seq .. ' ' .. msg)
end
local own = 0
if holder == ARGV[7] then
  own = 1
elseif not holder and redis.call('SCARD', KEYS[5]) == 1 and redis.call('SISMEMBER', KEYS[5], ARGV[7]) == 1 then
  redis.call('SET', KEYS[4], ARGV[7], 'EX', ARGV[4])
  own = 1
end
return {seq, own}
