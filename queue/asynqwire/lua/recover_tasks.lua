-- Recover tasks whose lease expired, as asynq's recoverer does: their
-- taker died or froze, so each goes to the retry set with Retried + 1
-- and asynq's lease error, or to the archive when its retries are spent,
-- counted processed and failed (finish_task.lua does the move: it is put
-- before this script as the function finish_task).
-- The caller read the lease set and the tasks' messages first and names
-- every key; per task the script checks that what it read still holds:
-- the task is still leased, its lease still ended at or before the
-- cutoff (a taker that extended it meanwhile keeps it), and its message
-- is the one read (the retry count decided retry or archive). Then
-- finish_task checks that it is still active. A task that fails a check
-- is left as it is.
-- For task i (from 1), k = 8 * (i - 1) and a = 1 + 6 * (i - 1):
-- KEYS[k+1..k+8] -> finish_task.lua's KEYS (asynqwire.Task.FinishCall):
--   active, lease, the task's hash, retry or archived, the counters
-- ARGV[1] -> the cutoff, unix s: a lease scored after it has not expired
-- ARGV[a+1] -> the task's message as read
-- ARGV[a+2..a+6] -> finish_task.lua's ARGV (id, retry or archive, ...)
-- Output: one integer per task, 1 when recovered, 0 when left
local cutoff = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS / 8 do
  local k, a = 8 * (i - 1), 1 + 6 * (i - 1)
  local keys = {unpack(KEYS, k + 1, k + 8)}
  local args = {unpack(ARGV, a + 2, a + 6)}
  local score = redis.call('ZSCORE', keys[2], args[1])
  out[i] = 0
  if score and tonumber(score) <= cutoff and redis.call('HGET', keys[3], 'msg') == ARGV[a + 1] then
    out[i] = finish_task(keys, args)
  end
end
return out
