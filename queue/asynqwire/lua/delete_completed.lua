-- Delete the completed tasks whose retention has ended, as asynq's
-- janitor does: each leaves the completed set and its hash is deleted.
-- The caller read the ids due first and names their hashes; a task is
-- deleted only if it is still in the completed set with a score at or
-- before now (one enqueued again, or completed again, since the read is
-- left as it is).
-- KEYS[1] -> asynq:{<queue>}:completed
-- KEYS[1+i] -> asynq:{<queue>}:t:<ARGV[1+i]>
-- ARGV[1] -> now, unix s
-- ARGV[1+i] -> the ids read
-- Output: how many were deleted
local now = tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= now then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('DEL', KEYS[i])
    n = n + 1
  end
end
return n
