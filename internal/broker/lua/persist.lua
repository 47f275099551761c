-- persist.lua: stores the messages an owning node ordered in its rooms and
-- raises each room's seq counter to its last; it refuses a room another node
-- took over. A call is what one round of a node holds for rooms of one hash
-- slot and one history size and TTL, at most maxPersistBatch messages: one
-- script call a round instead of one a room, since a room rarely has more
-- than a message in a round's few milliseconds. Each room runs as if alone.
-- The keys' TTLs are renewed only when the node asks ("1", at most every
-- quarter TTL per room: renewDue, which passes the TTL and a quarter more),
-- when Redis lost the holder (the re-grant) or the counter: five EXPIREs a
-- message were most of the script's Redis CPU.
--
-- KEYS, five per room r (k = 5r):
--   KEYS[k+1] the room's seq counter
--   KEYS[k+2] its history stream
--   KEYS[k+3] its epoch
--   KEYS[k+4] its holder (the node that owns it)
--   KEYS[k+5] the set of nodes that loaded the room
-- ARGV[1] the owning node
-- ARGV[2] history size (0: keep none)
-- ARGV[3] TTL in seconds
-- then, per room in the order of KEYS, from a = 4 for the first:
--   ARGV[a]   "1" to renew the keys' TTLs
--   ARGV[a+1] n, the room's runs of messages in this call (at least 1): a
--             run is messages with consecutive seqs, stored as one stream
--             entry (redis_entry.go), so that a room's messages of a round
--             cost one XADD and the script never looks at a message
--   ARGV[a+2], ARGV[a+3], ARGV[a+4], ... n triples, in seq order: the seq
--             of the run's last message (the entry's id), the entry's
--             field ("m": one message; "ms": several, each as
--             <length>:<bytes>) and its value
--   the next room's from a + 2 + 3n.
-- The stream is trimmed by seq (MINID): an entry stays while its last
-- message is among the room's latest history, so the stream holds at least
-- those messages and at most one entry besides. A run whose last message
-- the stream already has (a follower's fill.lua wrote it, taking this node
-- for gone) is skipped; one that only begins below the stream's last entry
-- is written whole, and readers skip the seqs they have (appendEntry).
--
-- Returns, per room, 1 when stored, 0 when the room is not this node's.
local node, hist, ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3]

-- store writes one room's n runs, whose triples begin at ARGV[i].
local function store(k, renew, i, n)
  local holder = redis.call('GET', KEYS[k+4])
  if holder ~= node then
    if holder or redis.call('SCARD', KEYS[k+5]) ~= 1 or redis.call('SISMEMBER', KEYS[k+5], node) ~= 1 then
      return 0
    end
    redis.call('SET', KEYS[k+4], node, 'EX', ttl) -- Redis lost the keys: still ours alone
    renew = true
  end
  local last = 0
  for j = i, i + 3 * n - 3, 3 do
    last = tonumber(ARGV[j])
    if hist > 0 then
      local from = last - hist + 1
      if from < 1 then from = 1 end
      local r = redis.pcall('XADD', KEYS[k+2], 'MINID', from .. '-0', ARGV[j] .. '-1', ARGV[j+1], ARGV[j+2])
      if type(r) == 'table' and r.err then
        -- A follower wrote the run's last message already (fill.lua)
        -- for an owner it took for gone: the stream has it.
        if not string.find(r.err, 'equal or smaller', 1, true) then
          return redis.error_reply(r.err)
        end
      end
    end
  end
  local seq = redis.call('GET', KEYS[k+1])
  if not seq then
    renew = true -- a new counter: its keys may have none
  end
  if last > tonumber(seq or '0') then
    redis.call('SET', KEYS[k+1], last, 'KEEPTTL') -- SET alone would drop the TTL
  end
  if renew then
    for e = 1, 5 do redis.call('EXPIRE', KEYS[k+e], ttl) end
  end
  return 1
end

local res = {}
local a = 4
for r = 0, #KEYS / 5 - 1 do
  local n = tonumber(ARGV[a+1])
  res[#res+1] = store(r * 5, ARGV[a] == '1', a + 2, n)
  a = a + 2 + 3 * n
end
return res
