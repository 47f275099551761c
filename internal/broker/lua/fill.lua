-- fill.lua: a follower writes, for an owner that is gone (unheard, or its
-- lease ended) and may have held them, the messages of the room's stream
-- that it holds and Redis lacks (redis_fill.go). Within an epoch a seq
-- names one message on every node, so what a follower got from the owner
-- is what the owner would have written. Only messages that continue the
-- stream are written: from its last entry's seq + 1 (the counter's, while
-- it has none), consecutive, up to the first the follower lacks. A stream of another epoch (taken over since,
-- or lost) is left alone.
--
-- KEYS[1] the room's seq counter
-- KEYS[2] its history stream
-- KEYS[3] its epoch
-- ARGV[1] the follower's epoch of the room
-- ARGV[2] history size (more than 0)
-- then pairs, in seq order: a message's seq and its JSON.
--
-- Returns how many messages were written.
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return 0
end
-- The stream's last entry, or, for a stream not written yet (its owner
-- held every write), the counter.
local last
local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #top > 0 then
  last = tonumber(string.match(top[1][1], '^(%d+)-'))
else
  last = tonumber(redis.call('GET', KEYS[1]) or '0')
end
local hist, n = tonumber(ARGV[2]), 0
for i = 3, #ARGV, 2 do
  local seq = tonumber(ARGV[i])
  if seq == last + 1 then
    local from = seq - hist + 1
    if from < 1 then from = 1 end
    redis.call('XADD', KEYS[2], 'MINID', from .. '-0', seq .. '-1', 'm', ARGV[i+1])
    last, n = seq, n + 1
  elseif seq > last + 1 then
    break -- the follower lacks last + 1
  end
end
if n > 0 and last > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], last, 'KEEPTTL')
end
return n
