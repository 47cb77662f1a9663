-- Record the statuses of many runs a launcher started and finish their
-- tasks as done, each run as status_done.lua does it, in one call: the
-- runs of one shard that end together. A script call costs Redis some
-- 17 µs before it does any work (its arguments, the prelude, the
-- libraries' functions defined again on every call), and each command it
-- calls a few µs (docs/performance.md, "Launch"): the keys and arguments
-- every run of the shard shares come once, and the tasks' ends share
-- their commands where asynq's finish repeats them per task (the lease
-- set's ZREM, the completed set's ZADD, the counters).
-- A task is finished as finish_task.lua finishes it done: out of the
-- active list (none that is no longer there: it was recovered when its lease expired), out
-- of the lease set, into the completed set with its message (or deleted
-- without retention), counted processed.
-- A run whose status script answers statusRetry (the caller named the
-- wrong schedule or owner) is written nothing and its task not finished:
-- the caller calls status_done.lua for it with the keys it was answered.
-- KEYS[1] -> due zset
-- KEYS[2] -> in-flight zset
-- KEYS[3] -> the shard's auto-pause counter
-- KEYS[4] -> asynq:{<queue>}:scheduled of the shard's queue
-- KEYS[5..11] -> finish_task.lua's KEYS[1], KEYS[2], KEYS[4..8] (asynqwire.Task.FinishCall): active,
--                lease, destination, the day's and the total counters
-- KEYS[endsSharedKeys + endsRunKeys*(i-1) + 1..] -> run i's: run hash, schedule hash (status.lua's
--                KEYS[4]), owner's active set (KEYS[5]), backfill chain (KEYS[7]), task hash
-- ARGV[1] -> the shard's released channel
-- ARGV[2] -> now, ms
-- ARGV[3] -> counters' expiry, unix s (finish_task.lua's ARGV[5])
-- ARGV[endsSharedArgs + endsRunArgs*(i-1) + 1..] -> run i's: status.lua's ARGV[2..5] (idempotency
--                key, status, run id, error), ARGV[7..12] (from, rule, failed call, reason, schedule
--                id, owner), then finish_task.lua's ARGV[1] (task id), ARGV[3] (score), ARGV[4] (message)
-- Output: one element per run, in order: {finished, status.lua's output...}
-- as status_done.lua answers
local n = (#ARGV - endsSharedArgs) / endsRunArgs
local out, ids, completed = {}, {}, {}
for i = 1, n do
  local k, a = endsSharedKeys + endsRunKeys * (i - 1), endsSharedArgs + endsRunArgs * (i - 1)
  local res = status_main(
    {KEYS[k + 1], KEYS[1], KEYS[2], KEYS[k + 2], KEYS[k + 3], KEYS[3], KEYS[k + 4], KEYS[4]},
    {ARGV[1], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[2], ARGV[a + 5], ARGV[a + 6],
      ARGV[a + 7], ARGV[a + 8], ARGV[a + 9], ARGV[a + 10]})
  local finished = statusDoneNotFinished
  if res[1] ~= statusRetry then
    finished = 0
    local id = ARGV[a + 11]
    if redis.call('LREM', KEYS[5], 0, id) > 0 then
      finished = 1
      ids[#ids + 1] = id
      if ARGV[a + 12] == '' then
        redis.call('DEL', KEYS[k + 5])
      else
        completed[#completed + 1] = ARGV[a + 12]
        completed[#completed + 1] = id
        redis.call('HSET', KEYS[k + 5], 'msg', ARGV[a + 13], taskState, 'completed')
      end
    end
  end
  out[i] = {finished, unpack(res)}
end
local m = #ids
if m == 0 then
  return out
end
redis.call('ZREM', KEYS[6], unpack(ids))
if #completed > 0 then
  redis.call('ZADD', KEYS[7], unpack(completed))
end
if redis.call('INCRBY', KEYS[8], m) == m then
  redis.call('EXPIREAT', KEYS[8], ARGV[3])
end
-- asynq wraps its total at the largest int64, where INCRBY fails: m
-- increments that do not reach it are one INCRBY; else one at a time,
-- as finish_task.lua counts.
local total = redis.pcall('INCRBY', KEYS[10], m)
if type(total) == 'table' and total.err then
  for _ = 1, m do
    if redis.call('GET', KEYS[10]) == '9223372036854775807' then
      redis.call('SET', KEYS[10], 1)
    else
      redis.call('INCR', KEYS[10])
    end
  end
end
return out
