-- Make tasks whose time has come runnable: move them from asynq's
-- scheduled or retry set to its pending list with the fields asynq's own
-- forwarder sets. Run tasks have no group.
-- Every key comes in KEYS: the caller reads the ids due first (at most
-- ForwardBatch, where asynq's forwarder moves 100 a call) and names them
-- with their task keys; the script moves those still in the set and due,
-- and leaves the ones another caller moved since. The caller tries a
-- MULTI/EXEC first (Queue.forwardBatch); this runs when the set changed.
-- KEYS[1] -> asynq:{<queue>}:scheduled or asynq:{<queue>}:retry
-- KEYS[2] -> asynq:{<queue>}:pending
-- KEYS[2+i] -> asynq:{<queue>}:t:<ARGV[2+i]>
-- ARGV[1] -> now, unix s (tasks scored at or before it are due)
-- ARGV[2] -> now, unix ns (pending_since)
-- ARGV[3...] -> the ids read due
-- Output: how many were moved
--
-- Which named ids are still due is read once, as the first due ids of
-- the set, not with a ZSCORE per id: a call from Lua costs Redis about 4k
-- instructions beside the command, and ZSCORE formats its score as a
-- double (BenchmarkForwardRedisCost, callgrind). The caller read the
-- named ids as the first due; twice as many covers those and any due
-- ids written before them since. A named id past that is left for the
-- next call, which reads it again.
local named = #ARGV - 2
local due = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 2 * named)) do
  due[id] = true
end
local moved = {}
for i = 3, #ARGV do
  if due[ARGV[i]] then
    due[ARGV[i]] = nil
    moved[#moved + 1] = ARGV[i]
    redis.call('HSET', KEYS[i], 'state', 'pending', 'pending_since', ARGV[2])
  end
end
if #moved == 0 then
  return 0
end
redis.call('ZREM', KEYS[1], unpack(moved))
redis.call('LPUSH', KEYS[2], unpack(moved))
return #moved
