-- Hand a batch of run tasks to asynq, writing asynq's own layout (as its
-- enqueue and schedule scripts do). A task whose id exists is left alone:
-- the TaskID is the idempotency key, so that is a run asynq already has.
-- KEYS[1] -> asynq:{<queue>}:pending
-- KEYS[2] -> asynq:{<queue>}:scheduled
-- ARGV[1] -> task key prefix, asynq:{<queue>}:t:
-- ARGV[2] -> now, unix nanoseconds (pending_since)
-- ARGV[3..] -> per task: id, encoded TaskMessage, process_at unix seconds ("0" = now)
-- Output: number of tasks written
local n = 0
for i = 3, #ARGV, 3 do
  local key = ARGV[1] .. ARGV[i]
  if redis.call('EXISTS', key) == 0 then
    if ARGV[i + 2] == '0' then
      redis.call('HSET', key, 'msg', ARGV[i + 1], 'state', 'pending', 'pending_since', ARGV[2])
      redis.call('LPUSH', KEYS[1], ARGV[i])
    else
      redis.call('HSET', key, 'msg', ARGV[i + 1], 'state', 'scheduled')
      redis.call('ZADD', KEYS[2], ARGV[i + 2], ARGV[i])
    end
    n = n + 1
  end
end
return n
