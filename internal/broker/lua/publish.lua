-- publish.lua: gives each of a batch of messages its seq, stores it and
-- publishes it, and keeps the room's keys alive as long as its seq; it grants
-- a room to the publishing node when that node alone has loaded it (the set
-- of nodes). A batch is what one round of a node holds for one Redis (for one
-- hash slot of a Redis Cluster), at most maxPublishBatch messages: one script
-- call instead of one a message. Each message runs as if alone, in the
-- batch's order. The keys' TTLs are renewed only when the node asks ("1", at
-- most every quarter TTL per room: renewDue, which passes the TTL and a
-- quarter more) or the counter is new: four EXPIREs a message were a third
-- of the script's Redis CPU.
--
-- How the messages travel (ARGV[3]):
--   "n" (one Redis): to the nodes that loaded each room (its set of nodes),
--       ONE PUBLISH per node per call on the node's channel (ARGV[5] .. node)
--       carrying every message of the call for that node, each framed as
--       <len(room)>:<room><seq>:<len(json)>:<json> (lengths in bytes,
--       decimal; redis_nodechan.go splits them). One PUBLISH a message on each
--       room's channel cost Redis a third of its time and each node a
--       wake-up a message.
--   "s" (Redis Cluster): SPUBLISH "<seq> <json>" on the room's shard channel,
--       one a message: a script may only reach its own slot, and a node's
--       channel lives in another.
--   "-": PUBLISH "<seq> <json>" on the room's channel, one a message.
--
-- KEYS, five per message m (k = 5m):
--   KEYS[k+1] the room's seq counter
--   KEYS[k+2] its history stream
--   KEYS[k+3] its epoch
--   KEYS[k+4] its holder (the node that owns it)
--   KEYS[k+5] the set of nodes that loaded the room
-- ARGV[1] history size (0: keep none)
-- ARGV[2] TTL in seconds
-- ARGV[3] "n", "s" or "-": how to publish (above)
-- ARGV[4] the publishing node
-- ARGV[5] the prefix of the nodes' channels ("n")
-- ARGV[6] the prefix of every key and channel: with ":{room}:messages",
--         the room's channel, where its control messages go ("n")
-- ARGV[7] "1" with the owner order: a room any node holds, the publishing
--         one included, is ordered by its holder alone (its rooms, not
--         Redis), so it is refused here too; "0": the publishing node's
--         own room is ordered here (the Redis order's grant)
-- then four per message m (a = 8 + 4m):
--   ARGV[a]   the message's JSON before the seq (prefix)
--   ARGV[a+1] the message's JSON after the seq (suffix)
--   ARGV[a+2] the room's channel; its name for "n"
--   ARGV[a+3] "1" to renew the keys' TTLs
--
-- A stream gone (its counter new and its epoch missing: the keys expired
-- while nodes kept the room loaded, or were flushed) starts anew under an
-- epoch made here (the node's id and Redis's clock: made only then, never
-- sent with every call), and "E<epoch>" goes on the room's channel before
-- the message: a node
-- that has the room holds seqs the new stream hands out again, and would
-- take seq 1 for a message it has, so it drops the room instead and its
-- members resume and are told (reset). A room no node loaded yet has an
-- epoch already (made when the first node loads it).
--
-- Returns, per message, its seq and 1 when the node owns the room, else 0;
-- or 0 and -1, without publishing, when another node holds the room (or,
-- with ARGV[7] "1", any node does).
local node, ttl, mode = ARGV[4], ARGV[2], ARGV[3]
local hist = tonumber(ARGV[1])
local ownerOrder = ARGV[7] == '1'
local res = {}
local members = {} -- set of nodes key → its members, read once a call
local batches, order = {}, {} -- node → its framed messages; nodes in first-use order
local function nodesOf(key)
  local m = members[key]
  if m == nil then
    m = redis.call('SMEMBERS', key)
    members[key] = m
  end
  return m
end
for m = 0, #KEYS / 5 - 1 do
  local k, a = m * 5, 8 + m * 4
  local holder = redis.call('GET', KEYS[k+4])
  if holder and (holder ~= node or ownerOrder) then
    res[#res+1] = 0 -- another node orders this room: not here
    res[#res+1] = -1
  else
    local seq = redis.call('INCR', KEYS[k+1])
    if seq == 1 and redis.call('EXISTS', KEYS[k+3]) == 0 then
      local t = redis.call('TIME')
      local epoch = node .. t[1] .. t[2]
      redis.call('SET', KEYS[k+3], epoch, 'EX', ttl)
      local ch = ARGV[a+2]
      if mode == 'n' then ch = ARGV[6] .. ':{' .. ch .. '}:messages' end
      redis.call(mode == 's' and 'SPUBLISH' or 'PUBLISH', ch, 'E' .. epoch)
    end
    local s = tostring(seq)
    local msg = ARGV[a] .. s .. ARGV[a+1]
    local renew = ARGV[a+3] == '1' or seq == 1
    if hist > 0 then
      redis.call('XADD', KEYS[k+2], 'MAXLEN', ARGV[1], s .. '-1', 'm', msg)
      if renew then redis.call('EXPIRE', KEYS[k+2], ttl) end
    end
    if renew then
      redis.call('EXPIRE', KEYS[k+1], ttl)
      redis.call('EXPIRE', KEYS[k+3], ttl)
      redis.call('EXPIRE', KEYS[k+5], ttl)
    end
    if mode == 'n' then
      local room = ARGV[a+2]
      local rec = #room .. ':' .. room .. s .. ':' .. #msg .. ':' .. msg
      for _, n in ipairs(nodesOf(KEYS[k+5])) do
        local b = batches[n]
        if b == nil then
          b = {}
          batches[n] = b
          order[#order+1] = n
        end
        b[#b+1] = rec
      end
    elseif mode == 's' then
      redis.call('SPUBLISH', ARGV[a+2], s .. ' ' .. msg)
    else
      redis.call('PUBLISH', ARGV[a+2], s .. ' ' .. msg)
    end
    local own = 0
    if holder == node then
      own = 1
    elseif not holder then
      local nodes = nodesOf(KEYS[k+5])
      if #nodes == 1 and nodes[1] == node then
        redis.call('SET', KEYS[k+4], node, 'EX', ttl)
        own = 1
      end
    end
    res[#res+1] = seq
    res[#res+1] = own
  end
end
for _, n in ipairs(order) do
  redis.call('PUBLISH', ARGV[5] .. n, table.concat(batches[n]))
end
return res
