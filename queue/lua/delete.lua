-- Delete a schedule. Its run records stay readable for the retention, so
-- runs in flight can still report their status. The runs no launcher has
-- taken yet are settled in the same step (settle.lua).
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- KEYS[3] -> in-flight zset
-- KEYS[4] -> run history zset of the schedule
-- KEYS[5] -> the schedule's deletion mark
-- KEYS[6] -> asynq:{<queue>}:pending
-- KEYS[7] -> asynq:{<queue>}:scheduled
-- ARGV[1] -> schedule id
-- ARGV[2] -> run key prefix ("chronos:{sNN}:run:")
-- ARGV[3] -> retention of the run records, seconds
-- ARGV[4] -> this call's nonce
-- ARGV[5] -> now, ms
-- ARGV[6] -> asynq task key prefix ("asynq:{<queue>}:t:")
-- Output: {deleteDone, the runs it recorded SKIPPED (reasonDeleted)};
-- deleteDone when this call's script ran before; or deleteNotFound
-- The mark (the nonce, kept a minute) tells this call's script run again
-- by the client after a lost reply that the schedule it finds gone is the
-- one it deleted. An agent's alarm is not the registrar's to delete: it
-- is not found (its owner cancels it).
local id, rpfx, retention, nonce, now, tpfx = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if redis.call('HGET', KEYS[1], sfTarget) == targetWake then
  return deleteNotFound
end
if redis.call('DEL', KEYS[1]) == 0 then
  if redis.call('GET', KEYS[5]) == nonce then
    return deleteDone
  end
  return deleteNotFound
end
redis.call('SET', KEYS[5], nonce, 'EX', 60)
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
local _, skipped = settle_runs(KEYS[4], id, rpfx, tpfx, KEYS[6], KEYS[7], now, 'schedule deleted before the run started', reasonDeleted)
for _, k in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  redis.call('EXPIRE', rpfx .. k, retention)
end
redis.call('EXPIRE', KEYS[4], retention)
return {deleteDone, skipped}
