-- Finish a task taken by take_tasks.lua as asynq's server
-- finishes the tasks it runs, with the same keys, states and dashboard
-- counters: done (to the completed set, or deleted when the task keeps no
-- retention), retry (to the retry set at a time), archive (to the
-- archived set; the caller trims it then, trim_archive.lua) or requeue (back to the head
-- of the pending list, not counted: the launcher is stopping). A task no
-- longer in the active list was recovered (recover_tasks.lua) after its
-- lease expired: it is left as it is.
-- KEYS[1] -> asynq:{<queue>}:active
-- KEYS[2] -> asynq:{<queue>}:lease
-- KEYS[3] -> asynq:{<queue>}:t:<id>
-- KEYS[4] -> the destination: asynq:{<queue>}:completed, :retry, :archived or :pending
-- KEYS[5] -> asynq:{<queue>}:processed:<yyyy-mm-dd>
-- KEYS[6] -> asynq:{<queue>}:failed:<yyyy-mm-dd>
-- KEYS[7] -> asynq:{<queue>}:processed
-- KEYS[8] -> asynq:{<queue>}:failed
-- ARGV[1] -> task id
-- ARGV[2] -> how: done, retry, archive or requeue
-- ARGV[3] -> score in the destination, unix s (completed: expiry; retry: when; archived: now); "" to delete a done task
-- ARGV[4] -> the task's message, re-encoded by the caller
-- ARGV[5] -> counters' expiry, unix s
-- Output: 1 when finished, 0 when the task was not active
if redis.call('LREM', KEYS[1], 0, ARGV[1]) == 0 then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
local how = ARGV[2]
if how == 'requeue' then
  redis.call('RPUSH', KEYS[4], ARGV[1])
  redis.call('HSET', KEYS[3], 'state', 'pending')
  return 1
end
if how == 'done' and ARGV[3] == '' then
  redis.call('DEL', KEYS[3])
else
  local state = ({done = 'completed', retry = 'retry', archive = 'archived'})[how]
  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
  redis.call('HSET', KEYS[3], 'msg', ARGV[4], 'state', state)
end
local function count(day, total)
  if redis.call('INCR', day) == 1 then
    redis.call('EXPIREAT', day, ARGV[5])
  end
  -- asynq wraps its totals at the largest int64; INCR would fail there.
  if redis.call('GET', total) == '9223372036854775807' then
    redis.call('SET', total, 1)
  else
    redis.call('INCR', total)
  end
end
count(KEYS[5], KEYS[7])
if how ~= 'done' then
  count(KEYS[6], KEYS[8])
end
return 1
