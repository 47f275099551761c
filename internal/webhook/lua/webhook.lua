-- webhook.lua: the cluster's webhook state and its event stream. Every key
-- shares one hash tag, so a script sees the whole state at once (on a Redis
-- Cluster, one slot): each change of a node's connections is applied and
-- its events (0→1 and 1→0 transitions only) appended to the stream in the
-- same atomic step. Stream entries carry name, epoch, time (ms), node and,
-- as they apply, room, user, seq and msg.
--
-- KEYS[1]  epoch: names the state; missing (a new or emptied Redis) starts a
--          new one with a "reset" event
-- KEYS[2]  the event stream (entries after the cursor are still to send)
-- KEYS[3]  nodes: zset node → lease end (ms, Redis's clock)
-- KEYS[4]  rooms: hash room → connections in the cluster
-- KEYS[5]  members: hash room\31user → connections in the cluster
-- KEYS[6]  users: hash user → connections in any room of the cluster
-- KEYS[7]  the node's hash room\31user → its connections (for "gone", the
--          dead node's)
-- KEYS[8]  dropped: events not appended because the stream was full
-- KEYS[9]  the dispatcher's lease (its node)
-- KEYS[10] the cursor: the last stream entry the backend took
-- KEYS[11] gap: events dropped since the last one appended; the next one
--          appended follows a "dropped" event with their count, so the
--          backend sees the gap
-- KEYS[12] bytes: what the stream's entries hold (their fields' lengths)
--
-- ARGV[1] op: "apply", "sync", "renew", "gone", "leave", "lead", "commit"
-- ARGV[2] the node calling (for "gone", the dead node)
-- ARGV[3] lease in ms
-- ARGV[4] the stream's most entries
-- ARGV[5] a new epoch, used when KEYS[1] is missing
-- ARGV[6] the stream's most bytes (KEYS[12])
-- ARGV[7...] items: for "apply" and "sync", four each: "p", room, user, the
--            node's count, or "m", room, seq, the message, or "d", "", n,
--            "": n events the node gave up (Redis unreachable too long),
--            counted in the next "dropped" event; "sync" sets every count
--            of the node not among them to 0;
--            for "commit", the last entry sent
--
-- Returns {status, appended, dropped, ...}: status -1 when the node is not
-- in the nodes set (its lease ended, or Redis lost the state): it must send
-- "sync" with all it has. "renew" adds the dead nodes; "lead" answers
-- {1 or 0, cursor}; "commit" {1 or 0}.
local op, node = ARGV[1], ARGV[2]
local lease, maxlen, maxbytes = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if op == 'lead' then
  local holder = redis.call('GET', KEYS[9])
  if holder and holder ~= node then
    return {0, ''}
  end
  redis.call('SET', KEYS[9], node, 'PX', lease)
  return {1, redis.call('GET', KEYS[10]) or '0'}
end
if op == 'commit' then
  if redis.call('GET', KEYS[9]) ~= node then
    return {0}
  end
  local last = ARGV[7]
  redis.call('SET', KEYS[10], last)
  local sent = 0
  for _, e in ipairs(redis.call('XRANGE', KEYS[2], '-', last)) do
    for _, v in ipairs(e[2]) do
      sent = sent + #v
    end
  end
  if redis.call('DECRBY', KEYS[12], sent) <= 0 then
    redis.call('DEL', KEYS[12])
  end
  local ms, n = string.match(last, '^(%d+)-(%d+)$')
  redis.call('XTRIM', KEYS[2], 'MINID', ms .. '-' .. (tonumber(n) + 1))
  return {1}
end

local appended, dropped = 0, 0
local epoch = redis.call('GET', KEYS[1])

local function append(fields)
  local f = {'name', fields[1], 'epoch', epoch, 'time', tostring(now), 'node', node}
  for i = 2, #fields, 2 do
    f[#f + 1] = fields[i]
    f[#f + 1] = fields[i + 1]
  end
  redis.call('XADD', KEYS[2], '*', unpack(f))
  local size = 0
  for _, v in ipairs(f) do
    size = size + #v
  end
  redis.call('INCRBY', KEYS[12], size)
  appended = appended + 1
end

-- emit appends an event, after a "dropped" one when events were dropped
-- since the last, or drops it (counted) when the stream is full.
local function emit(fields)
  local gap = tonumber(redis.call('GET', KEYS[11]) or '0')
  local need = 1
  if gap > 0 then need = 2 end
  local len = redis.call('XLEN', KEYS[2])
  local size = 64 -- the names, the epoch, the time and the node
  for i = 2, #fields do
    size = size + #fields[i]
  end
  local full = len > 0 and tonumber(redis.call('GET', KEYS[12]) or '0') + size > maxbytes
  if len + need > maxlen or full then
    dropped = dropped + 1
    redis.call('INCR', KEYS[8])
    redis.call('INCR', KEYS[11])
    return
  end
  if gap > 0 then
    append({'dropped', 'count', tostring(gap)})
    redis.call('DEL', KEYS[11])
  end
  append(fields)
end

if not epoch then
  epoch = ARGV[5]
  redis.call('SET', KEYS[1], epoch)
  redis.call('DEL', KEYS[11], KEYS[12]) -- a reset says more than any gap before it; the stream is new
  emit({'reset'})
end

-- add adds d to hash field k and returns the new value (the field is gone at 0).
local function add(key, k, d)
  local v = redis.call('HINCRBY', key, k, d)
  if v <= 0 then
    redis.call('HDEL', key, k)
    return 0
  end
  return v
end

-- set makes the node's connections of user in room n, with the events of
-- the totals' transitions: online, occupied, joined on the way in; left,
-- vacated, offline on the way out.
local function set(room, user, n)
  local field = room .. '\31' .. user
  local old = tonumber(redis.call('HGET', KEYS[7], field) or '0')
  if n == old then
    return
  end
  if n > 0 then
    redis.call('HSET', KEYS[7], field, n)
  else
    redis.call('HDEL', KEYS[7], field)
  end
  local d = n - old
  local rt = add(KEYS[4], room, d)
  local mt, ut = 0, 0
  if user ~= '' then
    mt = add(KEYS[5], field, d)
    ut = add(KEYS[6], user, d)
  end
  if d > 0 then
    if user ~= '' and ut == d then emit({'user_online', 'user', user}) end
    if rt == d then emit({'room_occupied', 'room', room}) end
    if user ~= '' and mt == d then emit({'member_joined', 'room', room, 'user', user}) end
  else
    if user ~= '' and mt == 0 then emit({'member_left', 'room', room, 'user', user}) end
    if rt == 0 then emit({'room_vacated', 'room', room}) end
    if user ~= '' and ut == 0 then emit({'user_offline', 'user', user}) end
  end
end

-- clear sets every count of the node in KEYS[7] to 0.
local function clear(keep)
  local all = redis.call('HGETALL', KEYS[7])
  for i = 1, #all, 2 do
    if not (keep and keep[all[i]]) then
      local room, user = string.match(all[i], '^([^\31]*)\31(.*)$')
      set(room, user, 0)
    end
  end
end

local known = redis.call('ZSCORE', KEYS[3], node)

if op == 'gone' or op == 'leave' then
  -- a dead node (its lease ended: checked here, at once with the removal)
  -- or this node stopping
  if known and (op == 'leave' or tonumber(known) < now) then
    clear(nil)
    redis.call('DEL', KEYS[7])
    redis.call('ZREM', KEYS[3], node)
  end
  return {1, appended, dropped}
end

if op == 'renew' then
  if not known then
    return {-1, appended, dropped}
  end
  redis.call('ZADD', KEYS[3], now + lease, node)
  local res = {1, appended, dropped}
  for _, dead in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now)) do
    res[#res + 1] = dead
  end
  return res
end

if op == 'apply' and not known then
  return {-1, appended, dropped}
end
redis.call('ZADD', KEYS[3], now + lease, node)
for i = 7, #ARGV, 4 do
  if ARGV[i] == 'd' then -- before the events it precedes
    redis.call('INCRBY', KEYS[11], tonumber(ARGV[i + 2]))
  end
end
if op == 'sync' then
  local keep = {}
  for i = 7, #ARGV, 4 do
    if ARGV[i] == 'p' then
      keep[ARGV[i + 1] .. '\31' .. ARGV[i + 2]] = true
    end
  end
  clear(keep)
end
for i = 7, #ARGV, 4 do
  if ARGV[i] == 'p' then
    set(ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]))
  elseif ARGV[i] == 'm' then
    emit({'message_published', 'room', ARGV[i + 1], 'seq', ARGV[i + 2], 'msg', ARGV[i + 3]})
  end
end
return {1, appended, dropped}
