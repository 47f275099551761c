-- persist.lua: stores messages an owning node ordered and raises the seq
-- counter to the last; it refuses when another node took the room over.
--
-- KEYS[1..5] as publish.lua: seq, history, epoch, holder, set of nodes
-- ARGV[1] the owning node
-- ARGV[2] history size (0: keep none)
-- ARGV[3] TTL in seconds
-- ARGV[4], ARGV[5], ... the seq and the message (JSON) of each, in seq order
--
-- Returns 1 when stored, 0 when the room is not this node's.
local holder = redis.call('GET', KEYS[4])
if holder ~= ARGV[1] then
  if holder or redis.call('SCARD', KEYS[5]) ~= 1 or redis.call('SISMEMBER', KEYS[5], ARGV[1]) ~= 1 then
    return 0
  end
  redis.call('SET', KEYS[4], ARGV[1], 'EX', ARGV[3]) -- Redis lost the keys: still ours alone
end
local last = 0
for i = 4, #ARGV, 2 do
  if tonumber(ARGV[2]) > 0 then
    redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[2], ARGV[i] .. '-1', 'm', ARGV[i+1])
  end
  last = tonumber(ARGV[i])
end
if last > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], last)
end
for k = 1, 5 do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
return 1
