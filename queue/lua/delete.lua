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
-- KEYS[8] -> the schedule's queue backfill chain (release.lua), ended
-- KEYS[7+2i], KEYS[8+2i] -> the run hash and asynq task hash of ARGV[7+i],
--            the i-th member of the history as the caller read it
-- ARGV[1] -> schedule id
-- ARGV[2] -> unused (was the run key prefix: every key comes in KEYS)
-- ARGV[3] -> retention of the run records, seconds
-- ARGV[4] -> this call's nonce
-- ARGV[5] -> now, ms
-- ARGV[6] -> unused (was the task key prefix)
-- ARGV[7] -> n, the number of history members the caller read
-- ARGV[8..7+n] -> those members (idempotency keys), in order
-- Output: {deleteDone, the runs it recorded SKIPPED (reasonDeleted)};
-- deleteDone when this call's script ran before; deleteNotFound; or
-- deleteStale, nothing written: the history changed since it was read
-- The mark (the nonce, kept a minute) tells this call's script run again
-- by the client after a lost reply that the schedule it finds gone is the
-- one it deleted. An agent's alarm is not the registrar's to delete: it
-- is not found (its owner cancels it).
local id, retention, nonce, now = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
if redis.call('HGET', KEYS[1], sfTarget) == targetWake then
  return deleteNotFound
end
local runs = run_history_keys(KEYS[4], 8, tonumber(ARGV[7] or '0'), 9, 2)
if not runs then
  if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('GET', KEYS[5]) == nonce then
    return deleteDone
  end
  return deleteStale
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
redis.call('DEL', KEYS[8])
local _, skipped = settle_runs(KEYS[4], id, runs, KEYS[6], KEYS[7], now, 'schedule deleted before the run started', reasonDeleted)
for _, k in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  redis.call('EXPIRE', runs[k].run, retention)
end
redis.call('EXPIRE', KEYS[4], retention)
return {deleteDone, skipped}
