-- presence.lua: records a node's count of a user's connections in a room
-- (the field "node\31user" of the room's presence hash; 0 deletes it) and
-- announces it on the room's channel as "Pnode\31count\31user".
--
-- KEYS[1] the room's presence hash
-- ARGV[1] the node
-- ARGV[2] the user ("" for connections without one)
-- ARGV[3] the node's connections of the user in the room
-- ARGV[4] TTL in seconds
-- ARGV[5] the room's channel
-- ARGV[6] "s" to publish on a shard channel (SPUBLISH), else "-"
--
-- Returns 1.
local field = ARGV[1] .. '\31' .. ARGV[2]
if tonumber(ARGV[3]) > 0 then
  redis.call('HSET', KEYS[1], field, ARGV[3])
  redis.call('EXPIRE', KEYS[1], ARGV[4])
else
  redis.call('HDEL', KEYS[1], field)
end
local msg = 'P' .. ARGV[1] .. '\31' .. ARGV[3] .. '\31' .. ARGV[2]
if ARGV[6] == 's' then
  redis.call('SPUBLISH', ARGV[5], msg)
else
  redis.call('PUBLISH', ARGV[5], msg)
end
return 1
