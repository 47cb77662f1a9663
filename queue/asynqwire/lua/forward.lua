-- Make tasks whose time has come runnable: move them from asynq's
-- scheduled or retry set to its pending list with the fields asynq's own
-- forwarder sets. Run tasks have no group.
-- Every key comes in KEYS: the caller reads the ids due first (at most
-- ForwardBatch, where asynq's forwarder moves 100 a call) and names them
-- with their task keys; the script moves those still in the set and due,
-- and leaves the ones another caller moved since.
-- KEYS[1] -> asynq:{<queue>}:scheduled or asynq:{<queue>}:retry
-- KEYS[2] -> asynq:{<queue>}:pending
-- KEYS[2+i] -> asynq:{<queue>}:t:<ARGV[2+i]>
-- ARGV[1] -> now, unix s (tasks scored at or before it are due)
-- ARGV[2] -> now, unix ns (pending_since)
-- ARGV[3...] -> the ids read due
-- Output: how many were moved
local now = tonumber(ARGV[1])
local moved = {}
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= now then
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
