-- Make tasks whose time has come runnable: move them from asynq's
-- scheduled or retry set to its pending list with the fields asynq's own
-- forwarder sets, up to ARGV[4] at a time (asynq's moves 100 a call), so
-- a second's worth of runs enqueued ahead is runnable in a few calls. Run
-- tasks have no group.
-- KEYS[1] -> asynq:{<queue>}:scheduled or asynq:{<queue>}:retry
-- KEYS[2] -> asynq:{<queue>}:pending
-- ARGV[1] -> now, unix s (tasks scored at or before it are due)
-- ARGV[2] -> asynq task key prefix ("asynq:{<queue>}:t:")
-- ARGV[3] -> now, unix ns (pending_since)
-- ARGV[4] -> most tasks to move
-- Output: how many were moved
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))
if #ids == 0 then
  return 0
end
redis.call('ZREM', KEYS[1], unpack(ids))
redis.call('LPUSH', KEYS[2], unpack(ids))
for _, id in ipairs(ids) do
  redis.call('HSET', ARGV[2] .. id, 'state', 'pending', 'pending_since', ARGV[3])
end
return #ids
